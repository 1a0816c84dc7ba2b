#!/bin/sh
# Install the gpuops CLI, exactly the version the gpu-ops library needs, into a virtualenv
# on a plain Jenkins agent (agents built from the gpu-ops agent image already have it).
# Idempotent: when the virtualenv already holds that version, nothing is installed.
#
# Its distribution is gpu-ops-cli (a different project named "gpuops" is on the public index);
# what is installed is exactly a hashed requirements file, each wheel checked against its sha256
# (pip --require-hashes --only-binary :all:), never a name resolved against an index.
#
# Environment:
#   GPUOPS_VERSION       required: the library's version (libraryResource 'org/gpuops/VERSION')
#   GPUOPS_WHEELHOUSE    a directory of wheels built by scripts/wheelhouse.sh (offline install,
#                        pip --no-index); its requirements.txt holds every wheel's sha256
#   GPUOPS_INDEX_URL     or: an internal Python package index (PEP 503 "simple" URL) serving
#                        that wheelhouse; then GPUOPS_REQUIREMENTS is required
#   GPUOPS_REQUIREMENTS  the hashed requirements file to install (default with a wheelhouse:
#                        GPUOPS_WHEELHOUSE/requirements.txt); it must pin gpu-ops-cli==GPUOPS_VERSION
#   GPUOPS_VENV          where to install (default: $HOME/.gpuops/venv-$GPUOPS_VERSION)
#   GPUOPS_PYTHON        the Python (3.11+) to create the virtualenv with (default: python3)
#
# Output: "gpuops <version>" then "GPUOPS_CLI=<path of the gpuops executable>" (set env
# GPUOPS_CLI to that path, or put its directory on PATH). Exit status 0 only when that CLI
# reports exactly GPUOPS_VERSION.
#
# In a Jenkinsfile:
#   writeFile file: '.gpuops/bootstrap-gpuops.sh', text: libraryResource('org/gpuops/agent/bootstrap-gpuops.sh')
#   withEnv(["GPUOPS_VERSION=${libraryResource('org/gpuops/VERSION').trim()}",
#            'GPUOPS_WHEELHOUSE=/srv/gpuops/wheelhouse']) {
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
requirements=${GPUOPS_REQUIREMENTS:-}
if [ -z "$requirements" ]; then
    [ -n "$wheelhouse" ] ||
        fail "set GPUOPS_REQUIREMENTS to the hashed requirements file of this version (requirements.txt of scripts/wheelhouse.sh) to install from GPUOPS_INDEX_URL"
    requirements=$wheelhouse/requirements.txt
fi
if [ -n "$wheelhouse" ]; then
    origin="the wheelhouse $wheelhouse"
else
    origin="the index $index_url"
fi
[ -f "$requirements" ] ||
    fail "could not install gpu-ops-cli==$version from $origin: '$requirements' is not a file (the hashed requirements file of this version, requirements.txt of scripts/wheelhouse.sh)"
# the file must ask for this version: pip installs what it pins, and nothing else
awk -v want="gpu-ops-cli==$version" '$1 == want { found = 1 } END { exit !found }' "$requirements" ||
    fail "could not install gpu-ops-cli==$version from $origin: '$requirements' does not pin it"
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
            --no-index --find-links "$wheelhouse" --require-hashes --only-binary :all: -r "$requirements" ||
            fail "pip could not install gpu-ops-cli==$version from $origin (hash-checked against $requirements)"
    else
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
            --index-url "$index_url" --require-hashes --only-binary :all: -r "$requirements" ||
            fail "pip could not install gpu-ops-cli==$version from $origin (hash-checked against $requirements)"
    fi
fi

found=$(installed_version)
[ "$found" = "$version" ] || fail "$cli reports version '${found:-none}', expected $version"
report
