#!/usr/bin/env bash
# Build a release of gpu-ops, the version in resources/org/gpuops/VERSION (make release):
#   dist/<version>/wheelhouse/          every wheel, requirements.txt with each one's sha256
#   dist/<version>/gpu-ops-agent-<version>.oci.tar   the agent image (OCI archive)
#   dist/<version>/gpu-ops-builder-<version>.oci.tar the build pod's image builder (Podman API)
#   dist/<version>/release.json         version, commit, tag, base image (stand-in or not)
#   dist/<version>/SHA256SUMS           sha256 of every file above (sha256sum -c SHA256SUMS)
# and the annotated git tag v<version> on HEAD: the tag Jenkins loads the library by.
#
#   scripts/release.sh [--lab-base]
# Environment:
#   BASE_IMAGE  the agent image's base: a Jenkins inbound-agent image with python3 (3.11) of
#               your registry, e.g. registry.internal/jenkins/inbound-agent:jdk17 (required
#               unless --lab-base)
#   BUILDER_BASE_IMAGE  the image builder's base: your mirror of quay.io/podman/stable
#               (required unless --lab-base; resources/org/gpuops/agent/builder.Containerfile)
#   IMAGE_NAME  the agent image's name inside the archive (default gpu-ops/agent; the builder's
#               is <IMAGE_NAME without its last part>/builder)
#   PYTHON      the Python the wheels are built for (default .venv/bin/python): the agents'
#               Python version and architecture
# --lab-base: no base image can be pulled in the lab, so the image is built on the lab's
#   STAND-IN base (Debian bookworm + python3 from debootstrap, gpuops_lab.pythonbase), not on
#   a Jenkins inbound-agent image; the builder on busybox plus this host's podman, conmon and
#   runc, not on quay.io/podman/stable, running as root (BUILDER_USER=0). The output,
#   release.json and the images' label org.gpuops.base-stand-in say so. Such images are for
#   tests, not for Jenkins.
#
# Refuses (exit 3), before building anything: a dirty tree (tracked changes or untracked
# files), a tag v<version> that exists on another commit (a tag is never moved), a
# dist/<version> that exists. Missing buildah fails (exit 1): the image is never skipped.
set -euo pipefail

die() { # exit status, message
    echo "release: $2" >&2
    exit "$1"
}
# The image step needs buildah (Debian package buildah): fail before anything else.
command -v buildah >/dev/null 2>&1 ||
    die 1 "buildah is not installed: the agent image cannot be built, so no release is made (install the Debian package buildah; see docs/JENKINS-INSTALL.md)"

lab_base=0
for arg in "$@"; do
    case $arg in
    --lab-base) lab_base=1 ;;
    -h | --help)
        sed -n '2,31p' "$0"
        exit 0
        ;;
    *) die 2 "unknown argument '$arg' (usage: scripts/release.sh [--lab-base])" ;;
    esac
done

cd "${0%/*}/.."
root=$(pwd -P)
PY=${PYTHON:-.venv/bin/python}
[[ -x $PY ]] || die 1 "no Python at '$PY' (run make setup, or set PYTHON)"
version=$(<resources/org/gpuops/VERSION)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([a-z0-9.+-]*)$ ]] ||
    die 2 "resources/org/gpuops/VERSION holds '$version', not a version such as 0.1.0"
cli_version=$("$PY" -c 'import tomllib;print(tomllib.load(open("python/pyproject.toml","rb"))["project"]["version"])')
[[ $cli_version == "$version" ]] ||
    die 3 "python/pyproject.toml has version $cli_version, resources/org/gpuops/VERSION $version: the library needs the CLI of exactly its version"
image_name=${IMAGE_NAME:-gpu-ops/agent}
[[ $image_name =~ ^[a-z0-9]+([._/-][a-z0-9]+)*$ ]] || die 2 "IMAGE_NAME '$image_name' is not an image name such as gpu-ops/agent"
builder_file=resources/org/gpuops/agent/builder.Containerfile
image_ref_ok() { [[ ${#1} -le 255 && $1 =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]]; }
if ((lab_base)); then
    [[ -z ${BASE_IMAGE:-}${BUILDER_BASE_IMAGE:-} ]] || die 2 "give either --lab-base or BASE_IMAGE/BUILDER_BASE_IMAGE, not both"
else
    base=${BASE_IMAGE:-}
    [[ -n $base ]] || die 2 "set BASE_IMAGE to your Jenkins inbound-agent image with python3 (or --lab-base in the lab)"
    image_ref_ok "$base" ||
        die 2 "BASE_IMAGE '$base' is not an image reference such as registry.internal/jenkins/inbound-agent:jdk17"
    if [[ -f $builder_file ]]; then
        builder_base=${BUILDER_BASE_IMAGE:-}
        [[ -n $builder_base ]] || die 2 "set BUILDER_BASE_IMAGE to your mirror of quay.io/podman/stable (the image builder's base)"
        image_ref_ok "$builder_base" ||
            die 2 "BUILDER_BASE_IMAGE '$builder_base' is not an image reference such as registry.internal/podman/stable:v5"
    fi
fi

# -- refusals: nothing is built when the release could not be tagged -------------------------
tag=v$version
dirty=$(git status --porcelain --untracked-files=normal)
[[ -z $dirty ]] || die 3 "the working tree is dirty; commit or remove these first (a release is built from a commit):
$dirty"
head=$(git rev-parse HEAD)
tag_exists=0
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    tagged=$(git rev-parse "refs/tags/$tag^{commit}")
    [[ $tagged == "$head" ]] ||
        die 3 "tag $tag exists on commit $tagged, not on HEAD $head: a tag is never moved (raise resources/org/gpuops/VERSION for a new release)"
    [[ $(git cat-file -t "refs/tags/$tag") == tag ]] ||
        die 3 "tag $tag on HEAD is a lightweight tag, not an annotated one: delete it yourself or release another version"
    tag_exists=1
fi
dist=$root/dist/$version
[[ ! -e $dist ]] || die 3 "$dist exists: a version is built once (remove it to build it again)"

# built beside dist/<version> (same file system: the last step is a rename), removed on exit
mkdir -p "$root/dist"
work=$(mktemp -d "$root/dist/.build-$version.XXXXXX")
cleanup() {
    # buildah's private storage (vfs: plain directories, no mounts left by chroot builds)
    buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs rmi --all --force >/dev/null 2>&1 || true
    rm -rf -- "$work"
}
trap cleanup EXIT
out=$work/out
mkdir -p "$out"
started=$SECONDS

# -- the wheelhouse --------------------------------------------------------------------------
PYTHON=$PY scripts/wheelhouse.sh "$out/wheelhouse"
[[ $(<"$out/wheelhouse/GPUOPS_VERSION") == "$version" ]] || die 1 "the wheelhouse is not of version $version"
wheel_s=$((SECONDS - started))

# -- the agent image -------------------------------------------------------------------------
if ((lab_base)); then
    # the lab's stand-in base: an OCI archive in $GPUOPS_CACHE, built once by debootstrap
    base_archive=$("$PY" scripts/release-labbase.py)
    base=oci-archive:$base_archive
    stand_in=true
    echo "release: LAB STAND-IN BASE: the agent image is built on the lab's Debian bookworm + python3 base ($base_archive), not on a Jenkins inbound-agent image; it is for tests, not for Jenkins"
else
    stand_in=false
fi
ctx=$work/context
mkdir -p "$ctx" "$work/tmp"
cp resources/org/gpuops/agent/Containerfile resources/org/gpuops/agent/bootstrap-gpuops.sh "$ctx/"
cp -r "$out/wheelhouse" "$ctx/wheelhouse"
image=localhost/$image_name:$version
archive=gpu-ops-agent-$version.oci.tar
ba=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
image_started=$SECONDS
TMPDIR=$work/tmp "${ba[@]}" bud --isolation chroot --quiet \
    -f "$ctx/Containerfile" \
    --build-arg "BASE_IMAGE=$base" --build-arg "GPUOPS_VERSION=$version" \
    --label "org.gpuops.base=$base" --label "org.gpuops.base-stand-in=$stand_in" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$head" \
    -t "$image" "$ctx" >"$work/build.log" 2>&1 ||
    die 1 "building the agent image failed:
$(tail -n 30 "$work/build.log")"
TMPDIR=$work/tmp "${ba[@]}" push --quiet --format oci "$image" "oci-archive:$out/$archive:$image_name:$version" ||
    die 1 "writing the agent image to $archive failed"

# -- the image builder (the build pod's Podman API service), when the library has one -----------
builder_archive=
if [[ -f $builder_file ]]; then
    builder_name=${image_name%/*}/builder
    [[ $image_name == */* ]] || builder_name=builder
    builder_args=()
    if ((lab_base)); then
        # the lab's stand-in for quay.io/podman/stable: the agent's stand-in + this host's podman
        "$PY" scripts/release-labbase.py --builder-context "$work/builder-base"
        TMPDIR=$work/tmp "${ba[@]}" bud --isolation chroot --quiet -f "$work/builder-base/Containerfile" \
            -t localhost/gpuops-lab/podman-standin:"$version" \
            "$work/builder-base" >"$work/builder-base.log" 2>&1 ||
            die 1 "building the builder's lab stand-in base failed:
$(tail -n 30 "$work/builder-base.log")"
        builder_base=localhost/gpuops-lab/podman-standin:$version
        builder_args=(--build-arg BUILDER_USER=0) # the stand-in has no rootless user
        echo "release: LAB STAND-IN BASE: the image builder is built on busybox plus this host's podman, conmon and runc, as root, not on quay.io/podman/stable; it is for tests, not for Jenkins"
    fi
    mkdir -p "$work/builder-context"
    cp "$builder_file" "$work/builder-context/"
    TMPDIR=$work/tmp "${ba[@]}" bud --isolation chroot --quiet \
        -f "$work/builder-context/builder.Containerfile" \
        --build-arg "BASE_IMAGE=$builder_base" "${builder_args[@]}" \
        --label "org.gpuops.version=$version" \
        --label "org.gpuops.base=$builder_base" --label "org.gpuops.base-stand-in=$stand_in" \
        --label "org.opencontainers.image.version=$version" \
        --label "org.opencontainers.image.revision=$head" \
        -t "localhost/$builder_name:$version" "$work/builder-context" >"$work/builder.log" 2>&1 ||
        die 1 "building the image builder failed:
$(tail -n 30 "$work/builder.log")"
    builder_archive=gpu-ops-builder-$version.oci.tar
    TMPDIR=$work/tmp "${ba[@]}" push --quiet --format oci "localhost/$builder_name:$version" \
        "oci-archive:$out/$builder_archive:$builder_name:$version" ||
        die 1 "writing the image builder to $builder_archive failed"
fi
image_s=$((SECONDS - image_started))
# -- what was built, and its checksums ---------------------------------------------------------
image_digest=$("$PY" - "$out" "$version" "$head" "$tag" "$stand_in" \
    "$archive" "$image_name:$version" "$base" \
    "$builder_archive" "${builder_name:-}:$version" "${builder_base:-}" <<'PYTHON'
import json
import sys
import tarfile
from pathlib import Path

out, version, commit, tag, stand_in = sys.argv[1:6]


def image(archive: str, name: str, base: str) -> dict[str, str] | None:
    if not archive:
        return None
    # the image's manifest digest, as a registry reports it after a push
    with tarfile.open(Path(out) / archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        digest = json.load(member)["manifests"][0]["digest"]
    return {"archive": archive, "name": name, "digest": digest, "base": base}


doc = {
    "version": version,
    "commit": commit,
    "tag": tag,
    "wheelhouse": "wheelhouse/",
    "requirements": "wheelhouse/requirements.txt",
    "agent_image": image(*sys.argv[6:9]),
    "builder_image": image(*sys.argv[9:12]),
    "base_is_lab_stand_in": stand_in == "true",
}
(Path(out) / "release.json").write_text(json.dumps(doc, indent=2) + "\n")
print(doc["agent_image"]["digest"])
PYTHON
)
(cd "$out" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum --) >"$work/SHA256SUMS"
mv -- "$work/SHA256SUMS" "$out/SHA256SUMS"

# -- the tag, last: only a complete release is tagged ------------------------------------------
[[ -z $(git status --porcelain --untracked-files=normal) ]] || die 1 "building left the tree dirty; nothing tagged"
[[ $(git rev-parse HEAD) == "$head" ]] || die 1 "HEAD moved while building; nothing tagged"
if ((tag_exists)); then
    echo "release: tag $tag already on HEAD ($head): kept"
else
    git tag -a -m "gpu-ops $version" "$tag" "$head"
fi
mv -T -- "$out" "$dist"
echo "release: gpu-ops $version in $dist (wheelhouse ${wheel_s}s, agent image ${image_s}s, total $((SECONDS - started))s)"
echo "release:   $archive ($image_digest, base $base$([[ $stand_in == true ]] && echo ': LAB STAND-IN'))"
[[ -z $builder_archive ]] || echo "release:   $builder_archive (base $builder_base$([[ $stand_in == true ]] && echo ': LAB STAND-IN'))"
echo "release:   tag $tag -> $head; check: (cd $dist && sha256sum -c SHA256SUMS)"
