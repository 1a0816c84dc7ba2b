#!/usr/bin/env bash
# Build an offline wheelhouse of gpuops and its locked runtime dependencies (S-5, S-10).
#   scripts/wheelhouse.sh [OUT_DIR]            (default: ./wheelhouse)
# Wheels are built for the interpreter that runs this script (PYTHON, default .venv/bin/python):
# run it with the same Python version and architecture as the agents that will install it.
# Install on the air-gapped side:
#   python3 -m venv /opt/gpuops && /opt/gpuops/bin/pip install --no-index --find-links OUT_DIR gpuops
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-wheelhouse}")
PY=${PYTHON:-.venv/bin/python}
[[ -x $PY ]] || PY=python3
mkdir -p "$OUT"
# Hash-checked: every file must match python/requirements.lock. Dependencies published only as
# sources (multi-key-dict) are built into wheels here, so the offline side needs no compiler.
"$PY" -m pip wheel -q --disable-pip-version-check -r python/requirements.lock -w "$OUT"
# setuptools builds in python/build (its own cache, in this checkout) and never removes what
# has left the tree since (a renamed inventory would ship twice): build from an empty one.
rm -rf -- python/build
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$OUT" ./python
cp python/requirements.lock "$OUT/requirements.lock"
version=$("$PY" -c 'import tomllib;print(tomllib.load(open("python/pyproject.toml","rb"))["project"]["version"])')
echo "$version" >"$OUT/GPUOPS_VERSION"
echo "wheelhouse: $OUT ($(find "$OUT" -name '*.whl' | wc -l) wheels, gpuops $version)"
