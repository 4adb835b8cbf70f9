"""Any registered env and its feedback over the OpenEnv protocol (``feedbackgym serve-env``).

One env with the arm's feedback stack per WebSocket session, served by the
``openenv`` package's own server (:func:`openenv.core.env_server.create_app`):
the wire types (:mod:`~.wire`), one session's env (:mod:`~.session`), the app
and its runner (:mod:`~.app`), what a server serves (:mod:`~.settings`), and
the clients: a Gymnasium env over a server (:mod:`~.remote_env`, which
``feedbackgym agent --env-url`` and ``train-llm --env-url`` play) and TRL's
``environment_factory`` over a server (:mod:`~.trl_remote`).

Nothing here loads at ``import feedbackgym``; the modules that need the
``server`` extra (openenv, FastAPI, uvicorn, websockets) raise
:class:`~feedbackgym.errors.DependencyNotInstalled` naming it.

May import: core, chat, feedback, envs, wrappers, language (never training or cli).
"""
