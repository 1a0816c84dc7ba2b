#!/usr/bin/env bash
# Build the lab's Kubernetes control-plane binaries from Go modules (issue 3, component 4):
#   etcd (lab/kube/etcd), kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#   (lab/kube), kwok (lab/kube/kwok)
# into ${GPUOPS_CACHE:-$HOME/.cache/gpuops}/kube/<k8s-version>/bin/.
# Idempotent: a binary whose stamp (module@version, Go version, go.sum hash) matches is skipped.
# Uses the machine's Go (GOTOOLCHAIN=local: never downloads a toolchain) and the committed go.sum
# files (-mod=readonly), so builds are reproducible.
# Usage: scripts/build-kube.sh [--print-bin-dir]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBE_DIR="$ROOT/lab/kube"
CACHE="${GPUOPS_CACHE:-$HOME/.cache/gpuops}"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

command -v go >/dev/null 2>&1 || { echo "build-kube: 'go' not found on PATH (Go >= 1.26 needed)" >&2; exit 1; }

# modver GO_MOD MODULE -> version required in GO_MOD
modver() {
    awk -v m="$2" '($1 == m && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == m) {print $3; exit}' "$1"
}

K8S_VERSION=$(modver "$KUBE_DIR/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(modver "$KUBE_DIR/etcd/go.mod" go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(modver "$KUBE_DIR/kwok/go.mod" sigs.k8s.io/kwok)
[[ -n "$K8S_VERSION" && -n "$ETCD_VERSION" && -n "$KWOK_VERSION" ]] || {
    echo "build-kube: cannot read module versions from $KUBE_DIR/{,etcd/,kwok/}go.mod" >&2; exit 1; }

BIN_DIR="$CACHE/kube/$K8S_VERSION/bin"
if [[ "${1:-}" == "--print-bin-dir" ]]; then echo "$BIN_DIR"; exit 0; fi
mkdir -p "$BIN_DIR"
# one build at a time per cache: several checkouts set up at once share the binaries
exec 9>"$BIN_DIR/.build.lock"
flock 9
GO_VERSION=$(go env GOVERSION)

stamp_of() { # stamp_of MODULE_DIR MODULE@VERSION [LDFLAGS]
    echo "$2 $GO_VERSION go.sum:$(sha256sum "$1/go.sum" | cut -c1-16) ldflags:$(printf '%s' "${3:-}" | sha256sum | cut -c1-8)"
}

# build MODULE_DIR MODULE@VERSION LDFLAGS PKG:NAME...
build() {
    local dir=$1 ldflags=$3 stamp; stamp=$(stamp_of "$1" "$2" "$3"); shift 3
    local pkgs=() names=() spec
    for spec in "$@"; do
        local pkg=${spec%%:*} name=${spec##*:}
        if [[ -x "$BIN_DIR/$name" && -f "$BIN_DIR/.$name.stamp" && "$(cat "$BIN_DIR/.$name.stamp")" == "$stamp" ]]; then
            echo "build-kube: $name up to date ($stamp)"
            continue
        fi
        pkgs+=("$pkg"); names+=("$name")
    done
    ((${#pkgs[@]})) || return 0
    local tmp; tmp=$(mktemp -d "$BIN_DIR/.build.XXXXXX")
    echo "build-kube: building ${names[*]} ($stamp)"
    local t0=$SECONDS
    (cd "$dir" && go build -trimpath -ldflags="-s -w $ldflags" -o "$tmp/" "${pkgs[@]}") || { rm -rf "$tmp"; return 1; }
    local i
    for i in "${!pkgs[@]}"; do
        local base; base=$(basename "${pkgs[$i]}")
        # go names the binary of ".../server/v3" after "server" (major-version suffix dropped)
        [[ "$base" =~ ^v[0-9]+$ ]] && base=$(basename "$(dirname "${pkgs[$i]}")")
        local built="$tmp/$base"
        mv -f "$built" "$BIN_DIR/${names[$i]}"
        echo "$stamp" > "$BIN_DIR/.${names[$i]}.stamp"
    done
    rm -rf "$tmp"
    echo "build-kube: built ${names[*]} in $((SECONDS - t0))s"
}

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
K8S_LDFLAGS=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_LDFLAGS+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

build "$KUBE_DIR/etcd" "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "" \
    "go.etcd.io/etcd/server/v3:etcd"
build "$KUBE_DIR/kwok" "sigs.k8s.io/kwok@$KWOK_VERSION" "" \
    "sigs.k8s.io/kwok/cmd/kwok:kwok"

# kwok does nothing without Stage configs; kwokctl passes its default "fast" stages in a config
# file (node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete). Do the
# same, taking them from the kwok module so they always match the binary.
KWOK_STAGES="$BIN_DIR/kwok-stages.yaml"
KWOK_STAMP=$(stamp_of "$KUBE_DIR/kwok" "sigs.k8s.io/kwok@$KWOK_VERSION")
if [[ ! -f "$KWOK_STAGES" || ! -f "$BIN_DIR/.kwok-stages.yaml.stamp" || "$(cat "$BIN_DIR/.kwok-stages.yaml.stamp")" != "$KWOK_STAMP" ]]; then
    kwok_src=$(cd "$KUBE_DIR/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
    {
        sep=""
        for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
                 pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
            printf '%s' "$sep"; cat "$kwok_src/kustomize/stage/$f.yaml"; sep=$'---\n'
        done
    } > "$KWOK_STAGES.tmp"
    mv -f "$KWOK_STAGES.tmp" "$KWOK_STAGES"
    echo "$KWOK_STAMP" > "$BIN_DIR/.kwok-stages.yaml.stamp"
    echo "build-kube: wrote $KWOK_STAGES"
fi
build "$KUBE_DIR" "k8s.io/kubernetes@$K8S_VERSION" "$K8S_LDFLAGS" \
    "k8s.io/kubernetes/cmd/kube-apiserver:kube-apiserver" \
    "k8s.io/kubernetes/cmd/kube-controller-manager:kube-controller-manager" \
    "k8s.io/kubernetes/cmd/kube-scheduler:kube-scheduler" \
    "k8s.io/kubernetes/cmd/kubectl:kubectl"

echo "build-kube: binaries in $BIN_DIR"
