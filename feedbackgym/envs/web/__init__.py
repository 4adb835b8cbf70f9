"""The web suite: long-horizon tasks in real Chromium through Playwright.

``WebEnv`` (``env.py``) plays the packaged apps under ``apps/`` (shop checkout,
multi-page form, order-processing admin); ``MiniWoBEnv`` (``miniwob.py``)
plays MiniWoB++ pages from the ``miniwob`` package. Both share ``BrowserEnv``
(``base.py``). Nothing is imported here, so ``import feedbackgym`` stays light:
Playwright loads when an env module is imported by ``gymnasium.make``.
"""
