"""Environment suites: ``ops`` (incident simulator), later ``web`` and ``code``.

Nothing is imported here: envs load through their registered string entry
points when ``gymnasium.make`` is called.
"""
