"""``gpuops image build / tag / inspect`` against the lab: real Podman API builds, real pushes
to the lab's docker-registry, the registry's own request log as the witness of what moved."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from imagelab import (
    CUDA_11_8_LABELLED,
    GPUOPS,
    RegistryLog,
    cli_env,
    context,
    cuda_12_2_base,
    gpuops,
    manifest_sizes,
    registry_flags,
)
from integration.conftest_registry import RegistryLab, pushed_digest, split_ref

from gpuops_lab import registry as labregistry

pytestmark = pytest.mark.lab

REV = "0123456789abcdef0123456789abcdef01234567"
APP = """\
FROM {base} AS build
ARG GREETING=hello
RUN echo "$GREETING from build" > /greeting
FROM {base} AS runtime
COPY unique.txt /unique.txt
COPY --from=build /greeting /greeting
CMD ["cat", "/greeting"]
FROM runtime AS debug
RUN echo debug > /debug
"""


def _repo(rlab: RegistryLab, name: str) -> str:
    return f"{rlab.url}/test/{name}-{uuid.uuid4().hex[:6]}"


def _build(
    rlab: RegistryLab,
    tmp_path: Path,
    repo: str,
    ctx: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> object:
    args = ["image", "build", "--image", repo, "--context", str(ctx), *registry_flags(rlab), *extra]
    return gpuops(args, env or cli_env(rlab, tmp_path / "home"), tmp_path)


def _app_context(rlab: RegistryLab, tmp_path: Path) -> Path:
    return context(tmp_path, APP.format(base=rlab.base_image), {"unique.txt": uuid.uuid4().hex})


def test_build_pushes_and_records_what_the_registry_serves(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "app")
    ctx = _app_context(registry_lab, tmp_path)
    record_file = tmp_path / "out" / "record.json"
    run = _build(
        registry_lab,
        tmp_path,
        repo,
        ctx,
        "--build-number",
        "41",
        "--git-revision",
        REV,
        "--tags",
        "latest",
        "--build-args",
        "GREETING=hi",
        "--target",
        "runtime",
        "--record-file",
        str(record_file),
        "--source",
        "https://git.example.com/team/app",
        "--link",
        "https://ci.example.com/job/app/41/",
    )
    assert run.returncode == 0, run.error
    record = run.result
    assert json.loads(record_file.read_text()) == record
    name = repo.split("/", 1)[1]
    tags = [f"{repo}:41", f"{repo}:git-0123456789ab", f"{repo}:latest"]
    assert record["tags"] == tags
    for tag in tags:  # every tag names the digest the registry itself reports
        assert registry_lab.manifest_digest(name, tag.rsplit(":", 1)[1]) == record["digest"]
    assert record["reference"] == f"{repo}@{record['digest']}"
    assert record["base_image"] == registry_lab.base_image
    assert record["git_revision"] == REV
    assert record["build_url"] == "https://ci.example.com/job/app/41/"
    assert record["cuda_version"] == "unknown"
    assert record["size_bytes"] == manifest_sizes(registry_lab, name, "41")
    labels = record["labels"]
    assert labels["org.opencontainers.image.revision"] == REV
    assert labels["org.opencontainers.image.source"] == "https://git.example.com/team/app"
    assert labels["org.opencontainers.image.version"] == "41"
    assert labels["org.opencontainers.image.base.name"] == registry_lab.base_image
    assert labels["org.opencontainers.image.created"] == record["created"]
    # the build log streamed to the console, and the target and build arg took effect
    assert "STEP" in run.stderr
    assert "pushing" in run.stderr
    out = registry_lab.docker.containers.run(f"{repo}@{record['digest']}", remove=True)
    assert out == b"hi from build\n"
    assert "echo debug" not in run.stderr  # the stage after the target was not built


def test_an_unchanged_rebuild_comes_from_the_cache(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "cache")
    ctx = _app_context(registry_lab, tmp_path)
    first = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "1", "--target", "runtime")
    second = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "2", "--target", "runtime")
    assert first.returncode == second.returncode == 0
    # build stage RUN and the runtime COPYs are new the first time, cached the second
    assert first.result["cached_steps"] < second.result["cached_steps"]
    assert second.result["cached_steps"] >= 4
    assert second.result["timings_s"]["build"] < first.result["timings_s"]["build"] * 2


def test_cuda_version_comes_from_nvidia_base_image_config(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    base = f"{registry_lab.url}/lab/cuda:12.2.2-base-{uuid.uuid4().hex[:6]}"
    registry_lab.build(base, cuda_12_2_base(registry_lab.base_image))
    pushed_digest(registry_lab.push(base))
    repo = _repo(registry_lab, "infer")
    ctx = context(tmp_path, f"FROM {base}\nCOPY app.py /app.py\n", {"app.py": "print(1)\n"})
    run = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "7")
    assert run.returncode == 0, run.error
    assert (run.result["cuda_version"], run.result["cuda_source"]) == ("12.2.2", "env CUDA_VERSION")
    assert run.result["base_image"] == base
    env = cli_env(registry_lab, tmp_path / "home")
    by_tag = gpuops(["image", "inspect", "--image", f"{repo}:7", "--plain-http"], env, tmp_path)
    digest = run.result["digest"]
    by_digest = gpuops(
        ["image", "inspect", "--image", f"{repo}@{digest}", "--plain-http"], env, tmp_path
    )
    assert by_tag.returncode == by_digest.returncode == 0
    assert by_tag.result["digest"] == by_digest.result["digest"] == digest
    info = by_tag.result
    assert (info["cuda_version"], info["platform"]) == ("12.2.2", "linux/amd64")
    assert info["labels"]["maintainer"] == "NVIDIA CORPORATION <cudatools@nvidia.com>"
    assert info["size_bytes"] == run.result["size_bytes"]
    assert info["created"]
    # an older base states it in a label too
    old = f"{registry_lab.url}/lab/cuda:11.8.0-{uuid.uuid4().hex[:6]}"
    registry_lab.build(old, CUDA_11_8_LABELLED.format(base=registry_lab.base_image))
    pushed_digest(registry_lab.push(old))
    labelled = gpuops(["image", "inspect", "--image", old, "--plain-http"], env, tmp_path)
    assert (labelled.result["cuda_version"], labelled.result["cuda_source"]) == (
        "11.8.0",
        "label com.nvidia.cuda.version",
    )


def test_moving_a_tag_copies_the_manifest_and_no_blob(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "move")
    ctx = _app_context(registry_lab, tmp_path)
    one = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "1")
    (ctx / "unique.txt").write_text(uuid.uuid4().hex)
    two = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "2")
    assert one.returncode == two.returncode == 0
    env, name = cli_env(registry_lab, tmp_path / "home"), repo.split("/", 1)[1]

    log = RegistryLog.of(registry_lab)
    add = gpuops(
        ["image", "tag", "--source", f"{repo}:1", "--target", "staging", "--plain-http"],
        env,
        tmp_path,
    )
    assert add.returncode == 0, add.error
    assert (add.result["digest"], add.result["previous_digest"]) == (one.result["digest"], None)
    assert registry_lab.manifest_digest(name, "staging") == one.result["digest"]
    moved = gpuops(
        ["image", "tag", "--source", f"{repo}:2", "--target", "staging", "--plain-http"],
        env,
        tmp_path,
    )
    assert moved.returncode == 0, moved.error
    assert moved.result["previous_digest"] == one.result["digest"]
    assert moved.result["changed"] is True
    assert registry_lab.manifest_digest(name, "staging") == two.result["digest"]
    assert registry_lab.manifest_digest(name, "2") == two.result["digest"]  # source untouched
    requests = log.requests()
    assert requests, "the registry logged nothing"
    assert all("/manifests/" in uri for _, uri, _ in requests), requests  # no blob at all
    assert {m for m, _, _ in requests} <= {"GET", "HEAD", "PUT"}
    # per move: GET the source, HEAD the target (its previous digest), PUT, HEAD to verify
    assert [m for m, _, _ in requests] == ["GET", "HEAD", "PUT", "HEAD"] * 2

    again = gpuops(
        ["image", "tag", "--source", f"{repo}:2", "--target", "staging", "--plain-http"],
        env,
        tmp_path,
    )
    assert again.returncode == 0
    assert again.result["changed"] is False
    assert not [r for r in log.requests() if r[0] == "PUT"]  # nothing to do: nothing written


def test_copying_a_tag_to_another_repository_mounts_and_uploads_nothing(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "src")
    built = _build(
        registry_lab, tmp_path, repo, _app_context(registry_lab, tmp_path), "--build-number", "5"
    )
    assert built.returncode == 0
    target = f"{_repo(registry_lab, 'prod')}:v5"
    log = RegistryLog.of(registry_lab)
    run = gpuops(
        ["image", "tag", "--source", f"{repo}:5", "--target", target, "--plain-http"],
        cli_env(registry_lab, tmp_path / "home"),
        tmp_path,
    )
    assert run.returncode == 0, run.error
    assert run.result["digest"] == built.result["digest"]
    assert registry_lab.manifest_digest(*split_ref(target)) == built.result["digest"]
    requests = log.requests()
    blob_requests = [r for r in requests if "/blobs/" in r[1]]
    assert blob_requests
    for method, uri, status in blob_requests:  # only existence checks and mounts, never data
        assert method == "HEAD" or (method == "POST" and "mount=" in uri and status == 201), uri
    assert run.result["mounted_blobs"] == len([r for r in blob_requests if r[0] == "POST"])


@pytest.mark.parametrize("fmt", ["oci", "v2s2"])
def test_an_index_is_copied_as_an_index(
    registry_lab: RegistryLab, tmp_path: Path, fmt: str
) -> None:
    repo = _repo(registry_lab, f"multi-{fmt.lower()}")
    ctx = context(tmp_path, "FROM scratch\nCOPY f /f\n", {"f": uuid.uuid4().hex})
    for arch in ("amd64", "arm64"):
        run = _build(
            registry_lab,
            tmp_path,
            repo,
            ctx,
            "--build-number",
            arch,
            "--platform",
            f"linux/{arch}",
            "--no-push",
        )
        assert run.returncode == 0, run.error
        assert run.result["pushed"] is False
        assert run.result["digest"] is None
    env = {**registry_lab.builder["env"], "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

    def podman(*args: str) -> None:
        subprocess.run(["podman", *args], env=env, check=True, capture_output=True, timeout=120)

    podman("manifest", "create", f"{repo}:list")
    for arch in ("amd64", "arm64"):
        podman("manifest", "add", f"{repo}:list", f"containers-storage:{repo}:{arch}")
    podman(
        "manifest",
        "push",
        "--all",
        "--format",
        fmt,
        "--tls-verify=false",
        f"{repo}:list",
        f"docker://{repo}:multi",
    )
    cli = cli_env(registry_lab, tmp_path / "home")
    before = gpuops(
        [
            "image",
            "inspect",
            "--image",
            f"{repo}:multi",
            "--plain-http",
            "--platform",
            "linux/arm64",
        ],
        cli,
        tmp_path,
    )
    assert before.returncode == 0, before.error
    index_type = {
        "oci": "application/vnd.oci.image.index.v1+json",
        "v2s2": "application/vnd.docker.distribution.manifest.list.v2+json",
    }[fmt]
    assert before.result["media_type"] == index_type
    assert [p["platform"] for p in before.result["platforms"]] == ["linux/amd64", "linux/arm64"]
    assert before.result["platform"] == "linux/arm64"
    assert before.result["labels"]["org.opencontainers.image.version"] == "arm64"

    log = RegistryLog.of(registry_lab)
    moved = gpuops(
        ["image", "tag", "--source", f"{repo}:multi", "--target", "release", "--plain-http"],
        cli,
        tmp_path,
    )
    assert moved.returncode == 0, moved.error
    assert (moved.result["digest"], moved.result["media_type"]) == (
        before.result["digest"],
        index_type,
    )
    assert registry_lab.manifest_digest(repo.split("/", 1)[1], "release") == before.result["digest"]
    assert all("/manifests/" in uri for _, uri, _ in log.requests())


def test_a_missing_tag_is_named_and_nothing_moves(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "missing")
    env = cli_env(registry_lab, tmp_path / "home")
    log = RegistryLog.of(registry_lab)
    run = gpuops(
        ["image", "tag", "--source", f"{repo}:nope", "--target", "prod", "--plain-http"],
        env,
        tmp_path,
    )
    assert run.returncode == 2
    assert run.error["field"] == "source"
    assert f"{repo}:nope does not exist" in run.error["message"]
    assert not [r for r in log.requests() if r[0] not in ("GET", "HEAD")]
    gone = gpuops(
        ["image", "inspect", "--image", f"{repo}@sha256:{'0' * 64}", "--plain-http"], env, tmp_path
    )
    assert (gone.returncode, gone.error["field"]) == (2, "image")


def test_registry_stopped_during_a_build_fails_unreachable_and_pushes_nothing(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "outage")
    ctx = context(tmp_path, f"FROM {registry_lab.base_image}\nRUN sleep 3 && echo slow > /slow\n")
    record = tmp_path / "record.json"
    env = cli_env(registry_lab, tmp_path / "home")
    args = [
        GPUOPS,
        "image",
        "build",
        "--image",
        repo,
        "--context",
        str(ctx),
        "--build-number",
        "1",
        "--plain-http",
        "--record-file",
        str(record),
    ]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lab = registry_lab.lab
    try:
        assert proc.stderr is not None
        seen = ""
        while "RUN sleep 3" not in seen:  # the build is running: the registry goes away
            line = proc.stderr.readline()
            assert line, f"the build ended early: {seen}"
            seen += line
        labregistry.stop_registry(lab)
        _, rest = proc.communicate(timeout=120)
    finally:
        labregistry.start_registry(lab)
    assert proc.returncode == 4, seen + rest
    assert "could not reach the registry" in rest
    assert not record.exists()
    assert registry_lab.manifest_digest(repo.split("/", 1)[1], "1") is None


def test_registry_stopped_before_a_tag_move_moves_nothing(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "down")
    ctx = _app_context(registry_lab, tmp_path)
    one = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "1", "--tags", "prod")
    (ctx / "unique.txt").write_text("changed")
    two = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "2")
    assert one.returncode == two.returncode == 0
    env = cli_env(registry_lab, tmp_path / "home")
    labregistry.stop_registry(registry_lab.lab)
    try:
        run = gpuops(
            ["image", "tag", "--source", f"{repo}:2", "--target", "prod", "--plain-http"],
            env,
            tmp_path,
        )
    finally:
        labregistry.start_registry(registry_lab.lab)
    assert run.returncode == 4
    assert "cannot reach the registry" in run.error["message"]
    assert registry_lab.manifest_digest(repo.split("/", 1)[1], "prod") == one.result["digest"]


def test_a_build_past_its_timeout_fails_and_says_so(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    repo = _repo(registry_lab, "slow")
    ctx = context(tmp_path, f"FROM {registry_lab.base_image}\nRUN sleep 12\n")
    started = time.monotonic()
    run = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "1", "--timeout", "3")
    elapsed = time.monotonic() - started
    assert run.returncode == 1
    assert "did not finish within the timeout of 3 s" in run.error["message"]
    assert elapsed < 10, elapsed  # the CLI returns at the deadline, not when the build ends
    assert registry_lab.manifest_digest(repo.split("/", 1)[1], "1") is None


def test_cleanup_removes_what_the_build_made_and_nothing_else(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    api = registry_lab.docker.api
    repo = _repo(registry_lab, "clean")
    ctx = _app_context(registry_lab, tmp_path)
    warm = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "1")  # cache to reuse
    assert warm.returncode == 0
    (ctx / "unique.txt").write_text(uuid.uuid4().hex)  # the runtime stage changes, build does not
    before = set(api.images(all=True, quiet=True))
    run = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "2", "--cleanup")
    assert run.returncode == 0, run.error
    after = set(api.images(all=True, quiet=True))
    assert after == before  # what the build made is gone; what was there stays (cache, base)
    cleanup = run.result["cleanup"]
    assert f"{repo}:2" in cleanup["removed"]
    assert run.result["image_id"] in cleanup["removed"]
    assert cleanup["kept"] == []
    assert run.result["cached_steps"] >= 2  # it did use the cache it left alone
    assert registry_lab.manifest_digest(repo.split("/", 1)[1], "2") == run.result["digest"]


def test_cleanup_keeps_the_base_image_the_build_pulled(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    """Issue 22: the base the last build used stays on the agent (the next build need not pull
    it again, several GB for a CUDA base); `image clean --daemon-wide` removes it once no last
    build names it. Everything else the build made goes."""
    api = registry_lab.docker.api
    base = f"{registry_lab.url}/test/base-{uuid.uuid4().hex[:6]}:1"
    registry_lab.build(base, f"FROM {registry_lab.base_image}\nLABEL pulled=yes\n")
    pushed_digest(registry_lab.push(base))
    registry_lab.docker.images.remove(base, force=True)  # in the registry, not on this "agent"
    before = set(api.images(all=True, quiet=True))
    repo = _repo(registry_lab, "pulls")
    ctx = context(tmp_path, f"FROM {base}\nCOPY a /a\n", {"a": uuid.uuid4().hex})
    run = _build(registry_lab, tmp_path, repo, ctx, "--build-number", "1", "--cleanup")
    assert run.returncode == 0, run.error
    pulled = registry_lab.docker.images.get(base).id  # still here
    assert set(api.images(all=True, quiet=True)) == before | {pulled}
    assert pulled not in run.result["cleanup"]["removed"]
    assert f"{repo}:1" in run.result["cleanup"]["removed"]


# -- the authenticated registry: htpasswd + TLS with the lab CA ------------------------------
def test_auth_registry_build_with_credentials_from_env_and_ca(
    auth_registry_lab: RegistryLab, tmp_path: Path
) -> None:
    rlab, home = auth_registry_lab, tmp_path / "home"
    home.mkdir()
    secret = labregistry.password(rlab.lab)
    repo = _repo(rlab, "authed")
    run = _build(
        rlab,
        tmp_path,
        repo,
        _app_context(rlab, tmp_path),
        "--build-number",
        "3",
        "--tags",
        "candidate",
        "--record-file",
        str(tmp_path / "rec.json"),
    )
    assert run.returncode == 0, run.error
    name = repo.split("/", 1)[1]
    assert rlab.manifest_digest(name, "3") == run.result["digest"]
    assert rlab.manifest_digest(name, "candidate") == run.result["digest"]
    assert not (home / ".docker").exists()  # nothing written to a shared docker config
    for text in (run.stdout, run.stderr, (tmp_path / "rec.json").read_text()):
        assert secret not in text
    moved = gpuops(
        [
            "image",
            "tag",
            "--source",
            f"{repo}:3",
            "--target",
            "prod",
            "--registry-ca",
            str(rlab.registry["ca"]),
        ],
        cli_env(rlab, home),
        tmp_path,
    )
    assert moved.returncode == 0, moved.error
    assert rlab.manifest_digest(name, "prod") == run.result["digest"]


def test_auth_registry_refuses_a_push_without_credentials(
    auth_registry_lab: RegistryLab, tmp_path: Path
) -> None:
    rlab = auth_registry_lab
    repo = _repo(rlab, "nocreds")
    env = cli_env(rlab, tmp_path / "home", credentials=False)
    run = _build(rlab, tmp_path, repo, _app_context(rlab, tmp_path), "--build-number", "1", env=env)
    assert run.returncode == 1
    assert f"refused the push of {repo}:1" in run.error["message"]
    assert rlab.manifest_digest(repo.split("/", 1)[1], "1") is None


def test_auth_registry_wrong_password_and_untrusted_ca(
    auth_registry_lab: RegistryLab, tmp_path: Path
) -> None:
    rlab = auth_registry_lab
    env = cli_env(rlab, tmp_path / "home")
    env["GPUOPS_REGISTRY_PASSWORD"] = "wrong-password-not-it"
    ref = rlab.base_image
    run = gpuops(["image", "inspect", "--image", ref, *registry_flags(rlab)], env, tmp_path)
    assert run.returncode == 1
    assert "refused the credentials" in run.error["message"]
    assert "wrong-password-not-it" not in run.stdout + run.stderr + json.dumps(run.doc)
    plain = gpuops(["image", "inspect", "--image", ref], cli_env(rlab, tmp_path / "home"), tmp_path)
    assert plain.returncode == 4
    assert "TLS certificate is not trusted" in plain.error["message"]
    assert "--registry-ca" in plain.error["hint"]
    ok = gpuops(
        ["image", "inspect", "--image", ref, *registry_flags(rlab)],
        cli_env(rlab, tmp_path / "home"),
        tmp_path,
    )
    assert ok.returncode == 0, ok.error
    assert ok.result["digest"] == rlab.builder["base_digest"]
