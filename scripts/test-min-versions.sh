#!/usr/bin/env bash
# The minimum-versions job: installs feedbackgym[baselines,hdf5] into a fresh venv with every
# core dependency (and those two extras') pinned to the lowest version pyproject.toml allows,
# runs `feedbackgym doctor` (before and after the extras), the core tests, then a short
# `feedbackgym compare --quick` as an unprivileged user. It needs no root, apt, Docker or Chromium; it downloads about 3 GB (the
# oldest torch wheels on the registry are CUDA builds) and takes 10-20 minutes, so it is not
# part of CI (.ci/run). See docs/developing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="baselines,hdf5"

WORK="$(mktemp -d -t feedbackgym-min-versions-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"  # the unprivileged run below reads the venv

# Every `NAME>=X` of the core dependencies and the extras becomes `NAME==X`.
"$PYTHON" - "$EXTRAS" >"$WORK/constraints.txt" <<'EOF'
import re
import sys
import tomllib

with open("pyproject.toml", "rb") as file:
    project = tomllib.load(file)["project"]
requirements = list(project["dependencies"])
for extra in sys.argv[1].split(","):
    requirements += project["optional-dependencies"][extra]
for requirement in requirements:
    match = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)", requirement)
    if match is None:
        sys.exit(f"no lower bound in {requirement!r}")
    print(f"{match[1]}=={match[2]}")
EOF
echo "min-versions: pins: $(tr '\n' ' ' <"$WORK/constraints.txt")"

# The package is built from a copy of the working tree (tracked and untracked, not ignored
# files), so no build output lands in the checkout.
mkdir "$WORK/src"
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do if [ -e "$file" ]; then printf '%s\0' "$file"; fi; done |
    xargs -0 cp --parents -t "$WORK/src"

# Run as root, the comparison at the end runs as `nobody`, so the venv's interpreter must be
# one that user can run (a Python under /root is not; asked through a shell, since setpriv's
# own exec still has root's capabilities).
BASE="$("$PYTHON" -c 'import sys; print(sys.executable)')"
as_user=()
if [ "$(id -u)" = 0 ]; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    if ! "${as_user[@]}" /bin/sh -c '"$1" -c ""' sh "$BASE" 2>/dev/null; then
        BASE=/usr/bin/python3
        echo "min-versions: nobody cannot run $PYTHON; the venv uses $BASE"
    fi
fi
"$BASE" -m venv "$WORK/venv"
VENV_PYTHON="$WORK/venv/bin/python"
"$VENV_PYTHON" -m pip install -q --upgrade pip
# Without the extras the doctor must say the core is not ready, and name the fix.
"$VENV_PYTHON" -m pip install -q -c "$WORK/constraints.txt" "$WORK/src"
if "$WORK/venv/bin/feedbackgym" doctor >"$WORK/doctor.txt"; then
    cat "$WORK/doctor.txt"
    echo "min-versions: the doctor called the core ready without the baselines extra" >&2
    exit 1
fi
grep -q 'fix: pip install "feedbackgym\[baselines\]"' "$WORK/doctor.txt"
"$VENV_PYTHON" -m pip install -q -c "$WORK/constraints.txt" "$WORK/src[$EXTRAS]" \
    "pytest>=8" "pytest-timeout>=2.2"
"$VENV_PYTHON" -m pip check
names="$(cut -d= -f1 "$WORK/constraints.txt" | sed 's/[-_.]/[-_.]/g' | paste -sd'|')"
"$VENV_PYTHON" -m pip list --format=freeze | grep -iE "^($names)=="
"$WORK/venv/bin/feedbackgym" doctor

# The core tests of the copy: the package, the ops suite, the wrappers, the store and the
# trainers (never the web or code suites). CI unset: a test that needs Chromium or Docker
# skips. Arguments go to that pytest (`--deselect ID`, `-x`).
export PATH="$WORK/venv/bin:$PATH"
cd "$WORK/src"
CI= "$VENV_PYTHON" -m pytest -q -p no:cacheprovider \
    tests/test_core.py tests/test_config.py tests/test_schedules.py tests/test_control.py \
    tests/test_import.py tests/cli tests/wrappers tests/envs/ops tests/datasets \
    tests/training/torch_ppo/test_ppo.py tests/training/torch_ppo/test_run_torch.py \
    tests/training/sb3/test_callbacks.py tests/training/sb3/test_run_sb3.py "$@"
CI= "$VENV_PYTHON" -m pytest -q -p no:cacheprovider tests/envs/test_registry.py -k Ops

# The main job's command, shortened to one seed of four rounds, by a user who is not root.
RUN="$WORK/run"
mkdir "$RUN"
if ((${#as_user[@]})); then
    chown 65534:65534 "$RUN"
fi
(cd "$RUN" && "${as_user[@]}" env HOME="$RUN" "$WORK/venv/bin/feedbackgym" \
    compare --quick --seeds 1 --steps 4096 --jobs 1 --out "$RUN/compare")
test -s "$RUN/compare/results.md"
echo "min-versions: passed"
