"""Environment suites: ``ops``, ``web`` and ``code``, with ``base`` what they share.

``ops`` is an incident simulator, ``web`` long-horizon tasks in real Chromium,
``code`` fixing a seeded bug in a generated project with its tests run in a
sandbox. Nothing is imported here: envs load through their registered string
entry points when ``gymnasium.make`` is called.
"""
