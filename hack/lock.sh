#!/usr/bin/env bash
# Refresh the locks in requirements/ from the ranges in setup.cfg: every runtime and test
# dependency, and the build backend (setuptools, wheel), pinned with the hashes of every file
# PyPI has for that version, so that CI and the image install exactly what was tested.
#
#   hack/lock.sh             re-resolve within the current pins where possible (pip-compile keeps them)
#   hack/lock.sh --upgrade   move every pin to the newest release the ranges allow
#
# pip-tools, not uv: its output is a plain requirements file that pip alone installs with
# --require-hashes, so neither CI nor the Dockerfile needs any tool beyond pip, and pip-tools is
# pure Python like the project. It runs from a throwaway virtual environment, pinned here.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP_TOOLS_VERSION=7.6.2

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/python" -m pip install -q "pip-tools==$PIP_TOOLS_VERSION"

# Hashes come from the index itself: the machine's pip configuration (local mirrors, find-links,
# constraints) must not leak into a lock that other machines install from.
export PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND=hack/lock.sh
compile() {
  "$tools/bin/pip-compile" --quiet --resolver=backtracking --generate-hashes --allow-unsafe \
    --all-build-deps --strip-extras --no-emit-index-url --no-emit-find-links \
    "$@" setup.cfg
}
compile --output-file requirements/runtime.txt "$@"
compile --extra test --output-file requirements/test.txt "$@"
echo "locked: $(grep -c '==' requirements/runtime.txt) runtime and $(grep -c '==' requirements/test.txt) test packages"
