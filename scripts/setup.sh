#!/usr/bin/env bash
# Install everything gpu-ops needs on a fresh Debian 12 machine, idempotently.
#   scripts/setup.sh [system] [python] [node] [kube]     (no argument: all of them)
# Re-running is cheap: each part checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${GPUOPS_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}

# Debian packages: the lab's real components, the Groovy toolchain, and Chromium for the
# reports' browser checks (driven by playwright-core from package.json).
APT_PACKAGES=(
  openssh-server openssh-client netcat-openbsd iproute2 util-linux procps
  docker-registry apache2-utils prometheus prometheus-alertmanager prometheus-pushgateway
  podman buildah skopeo runc conmon busybox-static debootstrap
  gradle curl jq ca-certificates openssl sudo
  chromium fonts-dejavu-core
)

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

setup_system() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    if ((EUID != 0)); then
      log "system: installing ${missing[*]} needs root (apt); the lab and its tests need root too"
      exit 1
    fi
    log "apt: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  mkdir -p /run/sshd
}

setup_python() {
  if [[ ! -x $VENV/bin/python ]]; then
    log "python: creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  local stamp=$VENV/.gpuops-lock.sha256
  local want
  want=$(cat python/requirements-dev.lock python/pyproject.toml lab/pyproject.toml | sha256sum | cut -d' ' -f1)
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    log "python: installing locked dependencies (python/requirements-dev.lock)"
    "$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes -r python/requirements-dev.lock
    # the product (distribution gpu-ops-cli, command gpuops) and, beside it, the lab package
    # (which adds `gpuops lab`); the agent wheelhouse and image hold the product only
    # (scripts/wheelhouse.sh). Both from this checkout (--no-deps): no name is resolved against
    # an index. A venv made before the rename holds the distribution "gpuops" (a name another
    # project has on the public index): it goes first, as it owns the same `gpuops` launcher.
    # setuptools' build metadata of that name in python/src (ignored by git) would still make
    # the editable product's path show a distribution "gpuops": it goes too.
    rm -rf -- python/src/gpuops.egg-info
    if compgen -G "$VENV/lib/python3*/site-packages/gpuops-*.dist-info" >/dev/null; then
      log "python: removing the distribution 'gpuops' (the product is gpu-ops-cli now)"
      "$VENV/bin/pip" uninstall -q -y --disable-pip-version-check gpuops
    fi
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e python -e lab
    echo "$want" >"$stamp"
  fi
}

setup_node() {
  if [[ ! -d node_modules/npm-groovy-lint || ! -d node_modules/playwright-core ]] ||
     [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
    log "node: npm ci (npm-groovy-lint, playwright-core)"
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
  fi
}

setup_kube() {
  scripts/build-kube.sh
}

parts=("$@")
((${#parts[@]})) || parts=(system python node kube)
for part in "${parts[@]}"; do
  case $part in
    system | python | node | kube) "setup_$part" ;;
    *) echo "setup.sh: unknown part '$part' (system, python, node, kube)" >&2; exit 2 ;;
  esac
done
