#!/usr/bin/env bash
# Lint, type-check and run the whole test suite (doctests included).
# Run scripts/setup.sh first: it installs and starts what the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# The set-up has installed Chromium and started Docker: a test that cannot find
# them fails rather than skips (see tests/conftest.py).
export CI="${CI:-true}"
"$PYTHON" -m ruff check feedbackgym tests benchmarks
"$PYTHON" -m ruff format --check feedbackgym tests benchmarks
"$PYTHON" -m mypy
"$PYTHON" -m pytest --doctest-modules --durations=30 feedbackgym tests "$@"
