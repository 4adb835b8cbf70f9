"""``python -m feedbackgym`` runs the ``feedbackgym`` command."""

from __future__ import annotations

import sys

from feedbackgym.cli import main

sys.exit(main())
