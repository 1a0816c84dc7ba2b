"""Pure logic of ``gpuops image``: references and tags, the CUDA->driver table and verdicts,
Dockerfile stages, the build record. Everything that talks to a daemon, a registry or a
cluster is tested against the lab (tests/python/integration/test_image_*.py)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuops.adapters.registry import DOCKER_LIST, OCI_MANIFEST, Credentials, Manifest, digest_of
from gpuops.core import cuda, dockerfile
from gpuops.core.imagerecord import BuildRecord, StepCount, oci_labels, rfc3339, shown_build_args
from gpuops.core.imageref import (
    ImageRef,
    build_tags,
    parse_key_values,
    parse_platform,
    parse_reference,
    parse_repository,
    parse_target,
)
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

D = "sha256:" + "ab" * 32


# -- references ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "registry", "repo", "tag", "digest"),
    [
        ("harbor.example.com/team/infer:42", "harbor.example.com", "team/infer", "42", None),
        ("127.0.0.1:5000/a/b/c:v1.2-rc_3", "127.0.0.1:5000", "a/b/c", "v1.2-rc_3", None),
        ("localhost/x", "localhost", "x", None, None),
        (f"reg.io:443/x@{D}", "reg.io:443", "x", None, D),
        (f"reg.io/x:1@{D}", "reg.io", "x", "1", D),
        ("[::1]:5000/x/y:t", "[::1]:5000", "x/y", "t", None),
        ("reg.io/a__b/c-d/e.f:T", "reg.io", "a__b/c-d/e.f", "T", None),
    ],
)
def test_parse_reference(
    text: str, registry: str, repo: str, tag: str | None, digest: str | None
) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repo, tag, digest)
    assert str(ref) == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("team/infer:1", "names no registry"),
        ("infer", "names no registry"),
        ("reg.io/Team/infer:1", "'Team' is not valid"),
        ("reg.io/team/infer:bad tag", "white space"),
        ("reg.io/team/infer:-x", "is not a valid tag"),
        ("reg.io/team/infer:" + "a" * 129, "is not a valid tag"),
        ("reg.io/x@sha256:abc", "is not a digest"),
        ("reg.io:99999/x", "out of range"),
        ("reg.io/", "names no repository"),
        ("reg.io//x", "is not valid"),
        ("", "non-empty"),
        ("reg.io/x:1\n", "white space"),
    ],
)
def test_bad_references_name_the_problem(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match="image reference") as err:
        parse_reference(text)
    assert says in err.value.message


def test_tag_or_digest_required_and_repository_only() -> None:
    with pytest.raises(InvalidInput, match="needs a tag"):
        parse_reference("reg.io/x", tag_required=True)
    assert parse_repository("reg.io/team/x") == ImageRef("reg.io", "team/x")
    with pytest.raises(InvalidInput, match="without a tag"):
        parse_repository("reg.io/team/x:1")
    with pytest.raises(InvalidInput, match="must not carry a digest"):
        parse_repository(f"reg.io/team/x@{D}")


def test_tag_target_stays_in_the_registry() -> None:
    src = parse_reference("reg.io/team/x:1")
    assert parse_target("staging", src) == ImageRef("reg.io", "team/x", "staging")
    assert parse_target("reg.io/prod/x:v1", src) == ImageRef("reg.io", "prod/x", "v1")
    with pytest.raises(InvalidInput, match="within one registry"):
        parse_target("other.io/team/x:1", src)
    with pytest.raises(InvalidInput, match="needs a tag"):
        parse_target("reg.io/team/y", src)
    with pytest.raises(InvalidInput, match="not a valid tag"):
        parse_target("bad tag", src)


def test_build_tags_follow_s19() -> None:
    rev = "0123456789abcdef0123456789abcdef01234567"
    assert build_tags("42", rev, ["latest", "42"]) == ["42", "git-0123456789ab", "latest"]
    assert build_tags(None, None, ["x"]) == ["x"]
    with pytest.raises(InvalidInput, match="not a commit id"):
        build_tags("1", "HEAD")
    with pytest.raises(InvalidInput, match="build number"):
        build_tags("4 2", None)


def test_key_values_and_platforms() -> None:
    assert parse_key_values("A=1,B=x=y", "build args") == {"A": "1", "B": "x=y"}
    assert parse_key_values('{"A": "1,2"}', "build args") == {"A": "1,2"}
    assert parse_key_values({"A": ""}, "labels") == {"A": ""}
    for bad, says in [
        ("A", "not KEY=VALUE"),
        ("=1", "must be non-empty"),
        ({"A": 1}, "must be a string"),
        ("A=1,A=2", "given twice"),
        ({"A": "x\ny"}, "control character"),
        ("{nope", "not valid JSON"),
    ]:
        with pytest.raises(InvalidInput, match="build args") as err:
            parse_key_values(bad, "build args")  # type: ignore[arg-type]
        assert says in err.value.message
    assert parse_platform("linux/arm64/v8") == "linux/arm64/v8"
    with pytest.raises(InvalidInput, match="os/arch"):
        parse_platform("amd64")


@given(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", fullmatch=True))
def test_every_valid_tag_round_trips(tag: str) -> None:
    ref = parse_reference(f"reg.example.com:5000/team/app:{tag}")
    assert ref.tag == tag
    assert parse_reference(str(ref)) == ref


# -- the CUDA -> driver table ---------------------------------------------------------------
V = cuda.Version.parse


@pytest.mark.parametrize(
    ("image", "full", "row"),
    [
        ("12.2", "535.54.03", "12.2 GA"),
        ("12.2.2", "535.54.03", "12.2 GA"),
        ("12.4.0", "550.54.14", "12.4 GA"),
        ("12.4.1", "550.54.15", "12.4 Update 1"),
        ("12.8.1", "570.26", "12.8 GA"),
        ("13.1.0", "590.44.01", "13.1"),
        ("11.8.0", "520.61.05", "11.8 GA"),
        ("12.7.0", "570.26", "12.8 GA's minimum is used"),  # not in the table: the next newer
    ],
)
def test_table_minimum(image: str, full: str, row: str) -> None:
    req = cuda.requirement(V(image))
    assert str(req.full_min) == full
    assert row in req.full_note


def test_minor_compat_floors_and_unknown_versions() -> None:
    assert str(cuda.requirement(V("12.9")).compat_min) == "525.60.13"
    assert str(cuda.requirement(V("13.2")).compat_min) == "580.65.06"
    assert str(cuda.requirement(V("11.4")).compat_min) == "450.80.02"
    newer = cuda.requirement(V("13.5"))
    assert newer.full_min is None
    assert "not in NVIDIA's table" in newer.full_note
    old = cuda.requirement(V("10.2"))
    assert old.full_min is None
    assert old.compat_min is None


def _labels(driver: str) -> dict[str, str]:
    return {"gpu-driver": driver}


@pytest.mark.parametrize(
    ("image", "driver", "strict", "verdict"),
    [
        ("12.2.2", "535.161.08", False, "ok"),
        ("12.2.2", "550.90.07", False, "ok"),
        ("12.2.2", "580.65.06", False, "ok"),  # newer drivers run older CUDA
        ("12.6.0", "535.161.08", False, "minor-compat"),
        ("12.6.0", "535.161.08", True, "too-old"),
        ("12.6.0", "525.60.13", False, "minor-compat"),
        ("12.6.0", "525.60.12", False, "too-old"),
        ("12.0", "520.61.05", False, "too-old"),
        ("13.0", "575.51.03", False, "too-old"),  # 13.x needs the 580 branch
        ("13.0", "580.65.06", False, "ok"),
        ("11.8", "470.82.01", False, "minor-compat"),
        ("11.8", "450.80.01", False, "too-old"),
        ("13.5", "590.48.01", False, "minor-compat"),
        ("13.5", "590.48.01", True, "unknown"),
        ("10.2", "535.161.08", False, "unknown"),
    ],
)
def test_node_verdicts(image: str, driver: str, strict: bool, verdict: str) -> None:
    req = cuda.requirement(V(image))
    assert cuda.node_verdict("n", _labels(driver), req, strict).verdict == verdict


def test_driver_labels_gfd_and_disagreement() -> None:
    legacy = {
        "nvidia.com/cuda.driver.major": "535",
        "nvidia.com/cuda.driver.minor": "161",
        "nvidia.com/cuda.driver.rev": "08",
    }
    got = cuda.node_driver(legacy)
    assert (str(got.version), got.source) == ("535.161.08", "nvidia.com/cuda.driver.*")
    assert got.version == V("535.161.8")  # compared by numbers
    full = cuda.node_driver({"nvidia.com/cuda.driver-version.full": "550.54.15"})
    assert str(full.version) == "550.54.15"
    parts = cuda.node_driver(
        {
            "nvidia.com/cuda.driver-version.major": "570",
            "nvidia.com/cuda.driver-version.minor": "133",
            "nvidia.com/cuda.driver-version.revision": "20",
        }
    )
    assert str(parts.version) == "570.133.20"
    both = cuda.node_driver({**legacy, "gpu-driver": "550.90.07"})
    assert str(both.version) == "535.161.08"  # the lower claim wins
    assert "labels disagree" in both.note
    none = cuda.node_driver({"gpu-driver": "latest"})
    assert none.version is None
    assert "not a version" in none.note
    assert cuda.node_driver({}).note == "no driver label"


def test_class_verdict_names_offenders_and_drivers() -> None:
    nodes = [
        ("b-new", _labels("570.133.20")),
        ("a-old", _labels("520.61.05")),
        ("c-none", {}),
        ("d-mid", _labels("535.161.08")),
    ]
    result = cuda.check_class(nodes, V("12.6"))
    assert not result.ok
    assert [n.node for n in result.offending] == ["a-old", "c-none"]
    assert [n.verdict for n in result.nodes] == ["too-old", "ok", "no-driver", "minor-compat"]
    assert str(result.needed) == "525.60.13"
    assert "a-old (520.61.05)" in result.message
    assert "c-none (no driver label)" in result.message
    doc = result.to_dict()
    assert [d["driver"] for d in doc["drivers"]] == [
        "none",
        "520.61.05",
        "535.161.08",
        "570.133.20",
    ]
    assert doc["offending"] == ["a-old", "c-none"]
    good = cuda.check_class(nodes[:1] + nodes[3:], V("12.2"))
    assert good.ok
    assert "drivers 535.161.08 (1), 570.133.20 (1)" in good.message
    assert not cuda.check_class([], V("12.2")).ok  # an empty class proves nothing


def test_image_cuda_version_sources() -> None:
    def of(labels: dict[str, object] | None, env: list[str] | None) -> tuple[object, str, str]:
        found = cuda.declared_cuda(labels, env)
        return found.version, found.source, found.problem

    assert of({"com.nvidia.cuda.version": "11.8.0"}, []) == (
        V("11.8.0"),
        "label com.nvidia.cuda.version",
        "",
    )
    env = ["PATH=/usr/bin", "CUDA_VERSION=12.2.2"]
    assert of({}, env) == (V("12.2.2"), "env CUDA_VERSION", "")
    require = ["NVIDIA_REQUIRE_CUDA=cuda>=12.1 brand=tesla,driver>=470,driver<471"]
    assert of(None, require) == (V("12.1"), "env NVIDIA_REQUIRE_CUDA", "")
    assert of(None, None) == (None, "unknown", "")
    assert of({"other": "x"}, ["PATH=/bin"]) == (None, "unknown", "")


@pytest.mark.parametrize(
    "value",
    ["12.8.0-1", "abc", "12.", "", " 12.8", "12.8\n", "12\u00a08", 12.8, True, None, ["12.8"]],
)
def test_a_cuda_label_that_is_there_but_unreadable_is_a_problem_not_no_label(value: object) -> None:
    found = cuda.declared_cuda({"com.nvidia.cuda.version": value}, ["CUDA_VERSION=12.2.2"])
    assert found.version is None
    assert found.source == "label com.nvidia.cuda.version"
    assert found.problem == (
        f"label com.nvidia.cuda.version {shown(value)} is not a CUDA version like 12.8 or 12.8.1"
    )


def test_an_unreadable_cuda_env_is_a_problem_and_a_long_value_is_cut() -> None:
    found = cuda.declared_cuda({}, ["CUDA_VERSION=banana"])
    assert (found.version, found.source) == (None, "env CUDA_VERSION")
    assert "'banana' is not a CUDA version" in found.problem
    found = cuda.declared_cuda(None, ["NVIDIA_REQUIRE_CUDA=brand=tesla,driver>=470"])
    assert (found.version, found.source) == (None, "env NVIDIA_REQUIRE_CUDA")
    assert "names no cuda>=" in found.problem
    found = cuda.declared_cuda({"com.nvidia.cuda.version": "\x1b[2J" + "1" * 5000}, [])
    assert len(found.problem) < 200 and "\x1b" not in found.problem


def test_declarations_that_disagree_need_the_newest() -> None:
    found = cuda.declared_cuda({"com.nvidia.cuda.version": "11.8.0"}, ["CUDA_VERSION=12.8.1"])
    assert found.version == V("12.8.1")
    assert found.problem == ""
    assert found.source == (
        "env CUDA_VERSION (label com.nvidia.cuda.version says 11.8.0; the newest is used)"
    )
    same = cuda.declared_cuda({"com.nvidia.cuda.version": "12.8.1"}, ["CUDA_VERSION=12.8.1"])
    assert (same.version, same.source) == (V("12.8.1"), "label com.nvidia.cuda.version")


# -- Dockerfiles --------------------------------------------------------------------------
MULTI = """\
# syntax=docker/dockerfile:1
ARG REGISTRY=reg.io
ARG BASE=${REGISTRY}/nvidia/cuda:12.2.2-base
FROM --platform=$BUILDPLATFORM ${BASE} AS build
RUN make \\
    all
FROM build AS test
FROM reg.io/lab/base:1 as runtime
COPY --from=build /out /out
"""


def test_base_image_of_each_target() -> None:
    assert dockerfile.base_image(MULTI) == "reg.io/lab/base:1"
    assert dockerfile.base_image(MULTI, target="build") == "reg.io/nvidia/cuda:12.2.2-base"
    assert dockerfile.base_image(MULTI, target="test") == "reg.io/nvidia/cuda:12.2.2-base"
    assert dockerfile.base_image(MULTI, {"BASE": "x.io/y:1"}, "TEST") == "x.io/y:1"
    assert dockerfile.base_image("FROM scratch\nCOPY a /\n") == "scratch"
    assert dockerfile.base_image("ARG T\nFROM reg.io/x:${T:-7}\n") == "reg.io/x:7"
    stages = dockerfile.stages(MULTI)
    assert [(s.name, s.platform) for s in stages] == [
        ("build", ""),
        ("test", None),
        ("runtime", None),
    ]


def test_bad_targets_and_dockerfiles() -> None:
    with pytest.raises(InvalidInput, match="stages named: build, runtime, test"):
        dockerfile.base_image(MULTI, target="nope")
    with pytest.raises(InvalidInput, match="no FROM"):
        dockerfile.base_image("RUN true\n")


# -- the record -----------------------------------------------------------------------------
def test_step_count_reads_podman_and_docker_logs() -> None:
    count = StepCount()
    for line in [
        "[1/2] STEP 1/2: FROM x AS b",
        "--> Using cache 4f85d5ecc548a820a22355ddff133a305ec213b30713752c3e3e062952a9d03b",
        "STEP 2/2: RUN true",
        "Step 3/4 : COPY a /a",
        " ---> Using cache",
        "Successfully built 1234",
    ]:
        count.feed(line)
    assert (count.steps, count.cached) == (3, 2)


def test_record_hides_secret_build_args_and_summarises() -> None:
    assert shown_build_args({"PIP_INDEX_TOKEN": "t", "A": "1"}) == {
        "A": "1",
        "PIP_INDEX_TOKEN": "****",
    }
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    labels = oci_labels(created=rfc3339(when), revision="abc1234", source=None)
    assert labels == {
        "org.opencontainers.image.created": "2026-01-02T03:04:05Z",
        "org.opencontainers.image.revision": "abc1234",
    }
    record = BuildRecord(
        image="reg.io/x",
        tags=["reg.io/x:1"],
        digest=D,
        git_revision=None,
        build_url=None,
        base_image="scratch",
        cuda_version="12.2.2",
        cuda_source="env CUDA_VERSION",
        size_bytes=1,
        local_size_bytes=2,
        image_id="sha256:1",
        created="c",
        labels={},
        build_args={"TOKEN": "s3cret"},
    )
    doc = record.to_dict()
    assert doc["reference"] == f"reg.io/x@{D}"
    assert doc["summary"] == "reg.io/x:1 (abababababab, CUDA 12.2.2)"
    assert "s3cret" not in str(doc)


# -- registry adapter: the pure parts -------------------------------------------------------
def test_credentials_come_in_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUOPS_REGISTRY_USERNAME", raising=False)
    monkeypatch.delenv("GPUOPS_REGISTRY_PASSWORD", raising=False)
    assert Credentials.from_env() is None
    monkeypatch.setenv("GPUOPS_REGISTRY_USERNAME", "ci")
    with pytest.raises(InvalidInput, match=r"\$GPUOPS_REGISTRY_PASSWORD is empty"):
        Credentials.from_env()
    monkeypatch.setenv("GPUOPS_REGISTRY_PASSWORD", "hunter2-secret")
    creds = Credentials.from_env()
    assert creds is not None
    assert "hunter2" not in repr(creds)


def test_manifest_descriptors() -> None:
    body = (
        b'{"schemaVersion":2,"config":{"digest":"sha256:c","size":3},'
        b'"layers":[{"digest":"sha256:l","size":5}]}'
    )
    m = Manifest(OCI_MANIFEST, digest_of(body), body)
    assert [b["digest"] for b in m.blobs()] == ["sha256:c", "sha256:l"]
    assert m.children() == []
    index = Manifest(DOCKER_LIST, "sha256:i", b'{"manifests":[{"digest":"sha256:a"}]}')
    assert index.is_index
    assert [c["digest"] for c in index.children()] == ["sha256:a"]
    assert index.blobs() == []


def test_compat_table_shows_every_refused_node_and_caps_the_rest() -> None:
    from gpuops.render.images import MAX_ROWS, compat_table

    nodes = [(f"n{i:03d}", _labels("550.90.07")) for i in range(60)]
    nodes += [("old-1", _labels("520.61.05")), ("old-2", {})]
    result = cuda.check_class(nodes, V("12.2"))
    data = {
        **result.to_dict(),
        "image": "reg.io/x:1",
        "cuda_source": "env CUDA_VERSION",
        "node_selector": {"accelerator": "h800"},
    }
    text = compat_table(data)
    assert "old-1" in text
    assert "old-2" in text
    assert f"... {62 - MAX_ROWS} more nodes (see --output json)" in text
    assert "needs driver >= 525.60.13" in text


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
TRICKY = st.text(
    alphabet=st.sampled_from("0123456789.-+ abc\n\x00\x85\u00a0\u2028\x9b"), max_size=80
)


@given(label=JSONISH | TRICKY, env=st.lists(TRICKY.map(lambda t: f"CUDA_VERSION={t}"), max_size=2))
def test_any_declared_cuda_is_a_version_or_a_bounded_problem(label: object, env: list[str]) -> None:
    found = cuda.declared_cuda({"com.nvidia.cuda.version": label}, env)
    assert (found.version is None) == found.unreadable
    if found.version is not None:
        assert isinstance(label, str) and found.version >= cuda.Version.parse(label)
    assert len(found.problem) < 160
    assert not any(c in found.problem for c in "\x00\n\x85\u2028\x9b")
