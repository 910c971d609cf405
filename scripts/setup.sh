#!/usr/bin/env bash
# Idempotent setup: system packages the grader uses (when root), a virtual environment, the
# project and its test dependencies. Safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap: the jail; postgresql: the server binaries (initdb, pg_ctl) the gradebook tests start a
# throwaway cluster with (tests/test_store.py); no service is enabled or started by this script
# chromium and a CJK font: the report tests render the HTML reports (English and zh-TW) once in a
# headless browser, as a person sees them
APT_PACKAGES=(${GRADER_APT_PACKAGES:-bubblewrap postgresql chromium fonts-noto-cjk})
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "warning: not root; please install: ${missing[*]}" >&2
    fi
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.installed-$(cat pyproject.toml client/pyproject.toml client/hatch_build.py | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install -q --upgrade pip
    # torch first, pinned, so nothing else can pull a different (CUDA) build
    .venv/bin/pip install -q "torch==2.13.0"
    # both distributions, editable: the student client (client/) and the grading one that requires
    # it (this folder), with the tests' extra; one command, so the client comes from here, not PyPI.
    # The setuptools install of before left an egg-info here, now on sys.path: a stale second client
    rm -rf gpt_bughunt_grader.egg-info
    .venv/bin/pip install -q -e ./client -e ".[test]"
    touch "$stamp"
fi
