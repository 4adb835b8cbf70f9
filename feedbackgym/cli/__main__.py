"""``python -m feedbackgym.cli``: the ``feedbackgym`` command (like ``python -m feedbackgym``)."""

from __future__ import annotations

import sys

from feedbackgym.cli import main

sys.exit(main())
