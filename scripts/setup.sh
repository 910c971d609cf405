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
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install -q --upgrade pip
    # torch first, pinned, so nothing else can pull a different (CUDA) build
    .venv/bin/pip install -q "torch==2.13.0"
    # the grading install (every extra the server, the batch and the tests need), editable
    .venv/bin/pip install -q -e ".[grading,test]"
    touch "$stamp"
fi
