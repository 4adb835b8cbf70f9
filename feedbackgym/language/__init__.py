"""Language agents: the LLM agent loop and the chat servers it talks to.

:mod:`~feedbackgym.language.agent_loop` plays text episodes with a chat model,
hints and reviews in its prompt, each prompt sized by
:mod:`~feedbackgym.language.prompt_window`;
:mod:`~feedbackgym.language.model_server` runs the local model server
(:mod:`~feedbackgym.language.llama_process`, with
:mod:`~feedbackgym.language.choice_mask`) for the model file
:mod:`~feedbackgym.language.model_file` finds (the packaged Gemma 3 270M by
default), and the versions of a run's adapter it serves
(:mod:`~feedbackgym.language.versions`, :mod:`~feedbackgym.language.served_versions`);
:mod:`~feedbackgym.language.stand_in_server` is a stand-in chat
server for fault injection (NOT a language model).
"""
