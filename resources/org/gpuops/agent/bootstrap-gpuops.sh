#!/bin/sh
# Install the gpuops CLI, exactly the version the gpu-ops library needs, into a virtualenv
# on a plain Jenkins agent (agents built from the gpu-ops agent image already have it).
# Idempotent: when the virtualenv already holds that version, nothing is installed.
#
# Environment:
#   GPUOPS_VERSION     required: the library's version (libraryResource 'org/gpuops/VERSION')
#   GPUOPS_WHEELHOUSE  a directory of wheels: gpuops and all its dependencies (offline install)
#   GPUOPS_INDEX_URL   or: an internal Python package index (PEP 503 "simple" URL)
#   GPUOPS_VENV        where to install (default: $HOME/.gpuops/venv-$GPUOPS_VERSION)
#   GPUOPS_PYTHON      the Python (3.11+) to create the virtualenv with (default: python3)
#
# Output: "gpuops <version>" then "GPUOPS_CLI=<path of the gpuops executable>" (set env
# GPUOPS_CLI to that path, or put its directory on PATH). Exit status 0 only when that CLI
# reports exactly GPUOPS_VERSION.
#
# In a Jenkinsfile:
#   writeFile file: '.gpuops/bootstrap-gpuops.sh', text: libraryResource('org/gpuops/agent/bootstrap-gpuops.sh')
#   withEnv(["GPUOPS_VERSION=${libraryResource('org/gpuops/VERSION').trim()}",
#            'GPUOPS_INDEX_URL=https://pypi.internal.example/simple']) {
#       sh 'sh .gpuops/bootstrap-gpuops.sh'
#   }
set -eu

fail() {
    echo "bootstrap-gpuops: $*" >&2
    exit 1
}

version=${GPUOPS_VERSION:-}
[ -n "$version" ] || fail "set GPUOPS_VERSION to the gpu-ops library's version (resources/org/gpuops/VERSION)"
printf '%s\n' "$version" | grep -Eq '^[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)$' ||
    fail "GPUOPS_VERSION '$version' is not a version such as 0.1.0"
wheelhouse=${GPUOPS_WHEELHOUSE:-}
index_url=${GPUOPS_INDEX_URL:-}
if [ -n "$wheelhouse" ] && [ -n "$index_url" ]; then
    fail "set only one of GPUOPS_WHEELHOUSE and GPUOPS_INDEX_URL"
fi
if [ -z "$wheelhouse" ] && [ -z "$index_url" ]; then
    fail "set GPUOPS_WHEELHOUSE (a directory of wheels) or GPUOPS_INDEX_URL (an internal package index)"
fi
if [ -n "$wheelhouse" ] && [ ! -d "$wheelhouse" ]; then
    fail "GPUOPS_WHEELHOUSE '$wheelhouse' is not a directory"
fi
[ -n "${HOME:-}" ] || [ -n "${GPUOPS_VENV:-}" ] || fail "set GPUOPS_VENV (HOME is not set)"
venv=${GPUOPS_VENV:-$HOME/.gpuops/venv-$version}
python=${GPUOPS_PYTHON:-python3}
cli="$venv/bin/gpuops"

# The version the CLI in the virtualenv reports, or nothing.
installed_version() {
    [ -x "$cli" ] || return 0
    "$cli" --output json --version 2>/dev/null |
        "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["version"])' 2>/dev/null || true
}

report() {
    echo "gpuops $version"
    echo "GPUOPS_CLI=$cli"
}

if [ "$(installed_version)" = "$version" ]; then
    report
    exit 0
fi

# One installer at a time per virtualenv (several builds may share an agent).
mkdir -p "$(dirname "$venv")"
lock="$venv.lock"
waited=0
until mkdir "$lock" 2>/dev/null; do
    [ "$waited" -lt 600 ] || fail "another install holds $lock for 10 minutes; remove it if no install runs"
    sleep 2
    waited=$((waited + 2))
done
trap 'rmdir "$lock" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM

if [ "$(installed_version)" != "$version" ]; then
    "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null ||
        fail "'$python' is not Python 3.11 or newer; set GPUOPS_PYTHON"
    if [ -e "$venv" ]; then
        [ -f "$venv/pyvenv.cfg" ] || fail "$venv exists and is not a virtualenv; set GPUOPS_VENV elsewhere"
        rm -rf "$venv"
    fi
    "$python" -m venv "$venv" || fail "could not create a virtualenv at $venv with '$python'"
    if [ -n "$wheelhouse" ]; then
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
            --no-index --find-links "$wheelhouse" "gpuops==$version" ||
            fail "pip could not install gpuops==$version from the wheelhouse $wheelhouse"
    else
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
            --index-url "$index_url" "gpuops==$version" ||
            fail "pip could not install gpuops==$version from the index $index_url"
    fi
fi

found=$(installed_version)
[ "$found" = "$version" ] || fail "$cli reports version '${found:-none}', expected $version"
report
