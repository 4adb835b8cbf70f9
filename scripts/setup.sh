#!/usr/bin/env bash
# Installs everything feedbackgym and its tests need, idempotently, and starts
# the Docker engine. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(chromium chromium-headless-shell docker.io bubblewrap debootstrap)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
# llama-cpp-python (the llm extra) builds llama.cpp from source: about 15 minutes on 2 cores.
# It is built once per machine into a wheel folder ($FEEDBACKGYM_WHEELS) that every later
# set-up, and every fresh venv, installs from in seconds.
WHEELS="${FEEDBACKGYM_WHEELS:-$HOME/.cache/feedbackgym-wheels}"
LLAMA_CPP="$("$PYTHON" -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["llm"] if r.startswith("llama-cpp-python")))')"
if ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "setup: building llama-cpp-python into $WHEELS (once per machine: about 15 minutes on 2 cores)"
    "$PYTHON" -m pip wheel -q --no-deps "${LLAMA_CPP%%\[*}${LLAMA_CPP#*\]}" -w "$WHEELS"
fi
"$PYTHON" -m pip install -q --prefer-binary --find-links "$WHEELS" "$LLAMA_CPP"
# torch is pinned in the same pip command as stable-baselines3 so that pip
# takes the local CPU wheel instead of a multi-GB CUDA build.
"$PYTHON" -m pip install -q -e ".[all,test]" "torch==2.13.0"

# The Docker engine: no default bridge, no iptables; containers run with --network none.
if ! docker info >/dev/null 2>&1; then
    echo "setup: starting dockerd"
    mkdir -p /var/log
    nohup dockerd --bridge=none --iptables=false --ip6tables=false \
        >/var/log/feedbackgym-dockerd.log 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start, see /var/log/feedbackgym-dockerd.log" >&2; exit 1; }
fi
"$PYTHON" -m feedbackgym sandbox build  # the code suite's image: debootstrap + docker import, cached by tag
echo "setup: ready"
