"""`make release`, built for real: wheelhouse with hashes, agent image as an OCI archive,
SHA256SUMS and the annotated tag v<version>, in a throwaway repository (this working tree's
files committed anew in a temp directory, so the tag never lands in the real repository).

LAB STAND-IN: the agent image is built on the lab's stand-in base (Debian bookworm + python3,
gpuops_lab.pythonbase, LAB_BASE=1), not on a Jenkins inbound-agent image: none can be pulled
here. The archive's label org.gpuops.base-stand-in=true and release.json say so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_agent import LIBRARY_VERSION, offline_env

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(sys.executable).parent.parent
#: The interpreter behind the test venv: what an agent's python3 would be.
BASE_PYTHON = str(Path(sys.base_prefix) / "bin" / "python3")
TAG = f"v{LIBRARY_VERSION}"
ARCHIVE = f"gpu-ops-agent-{LIBRARY_VERSION}.oci.tar"
BUILDER_ARCHIVE = f"gpu-ops-builder-{LIBRARY_VERSION}.oci.tar"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "release test",
    "GIT_AUTHOR_EMAIL": "release-test@example.invalid",
    "GIT_COMMITTER_NAME": "release test",
    "GIT_COMMITTER_EMAIL": "release-test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def sh(
    *argv: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Any:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env={**os.environ, **GIT_ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def git(repo: Path, *argv: str) -> str:
    done = sh("git", *argv, cwd=repo)
    assert done.returncode == 0, f"git {argv}: {done.stderr}"
    return str(done.stdout).strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This working tree's files (tracked and untracked-not-ignored) as one fresh commit."""
    dest = tmp_path_factory.mktemp("release") / "repo"
    names = sh("git", "ls-files", "-z", "-co", "--exclude-standard", cwd=ROOT).stdout
    for name in filter(None, names.split("\0")):
        src = ROOT / name
        if src.is_file():  # a tracked file deleted in the working tree is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "release test")
    return dest


def clone(repo: Path, dest: Path) -> Path:
    """A clean clone without the release tag (what a repository looks like before one)."""
    git(repo.parent, "clone", "-q", str(repo), str(dest))
    if git(dest, "tag", "-l", TAG):
        git(dest, "tag", "-d", TAG)
    return dest


@dataclass
class Release:
    dist: Path
    out: str
    seconds: float


@pytest.fixture(scope="module")
def release(repo: Path, record_testsuite_property: Any) -> Release:
    started = time.monotonic()
    done = sh("make", "-s", "release", f"VENV={VENV}", "LAB_BASE=1", cwd=repo, timeout=540)
    seconds = time.monotonic() - started
    record_testsuite_property("release_build_s", round(seconds, 1))
    assert done.returncode == 0, f"make release failed:\n{done.stdout}\n{done.stderr}"
    print(done.stdout)  # the step times (pytest -s shows them)
    return Release(repo / "dist" / LIBRARY_VERSION, done.stdout + done.stderr, seconds)


def image_config(archive: Path) -> dict[str, Any]:
    """The OCI image config inside an OCI archive (index -> manifest -> config)."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict[str, Any]:
            member = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            assert member is not None
            return dict(json.load(member))

        index = tar.extractfile("index.json")
        assert index is not None
        manifest = blob(json.load(index)["manifests"][0]["digest"])
        return blob(manifest["config"]["digest"])


def test_release_holds_every_artifact_checksummed_and_the_tag(release: Release, repo: Path) -> None:
    dist = release.dist
    files = sorted(str(p.relative_to(dist)) for p in dist.rglob("*") if p.is_file())
    assert {"SHA256SUMS", "release.json", ARCHIVE, "wheelhouse/requirements.txt"} <= set(files)
    # SHA256SUMS covers every other file, and each one matches
    listed = [line.split("  ", 1)[1] for line in (dist / "SHA256SUMS").read_text().splitlines()]
    assert listed == [f for f in files if f != "SHA256SUMS"]
    check = sh("sha256sum", "-c", "--strict", "SHA256SUMS", cwd=dist)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(listed)
    # every wheel, gpu-ops-cli of this version included, is pinned by its sha256
    requirements = (dist / "wheelhouse" / "requirements.txt").read_text()
    wheels = sorted((dist / "wheelhouse").glob("*.whl"))
    assert any(w.name.startswith(f"gpu_ops_cli-{LIBRARY_VERSION}-") for w in wheels)
    assert re.search(rf"^gpu-ops-cli=={re.escape(LIBRARY_VERSION)} ", requirements, re.M)
    for wheel in wheels:
        assert f"--hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}" in requirements
    # the annotated tag, on the commit the release was built from
    head = git(repo, "rev-parse", "HEAD")
    assert git(repo, "cat-file", "-t", TAG) == "tag"
    assert git(repo, "rev-parse", f"{TAG}^{{commit}}") == head
    doc = json.loads((dist / "release.json").read_text())
    assert (doc["version"], doc["commit"], doc["tag"]) == (LIBRARY_VERSION, head, TAG)


def test_agent_image_archive_is_of_this_version_and_says_its_base_is_a_stand_in(
    release: Release,
) -> None:
    labels = image_config(release.dist / ARCHIVE)["config"]["Labels"]
    assert labels["org.gpuops.version"] == LIBRARY_VERSION
    assert labels["org.opencontainers.image.version"] == LIBRARY_VERSION
    # LAB STAND-IN base, said in the image, in release.json and in the script's output
    assert labels["org.gpuops.base-stand-in"] == "true"
    assert labels["org.gpuops.base"].startswith("oci-archive:")
    doc = json.loads((release.dist / "release.json").read_text())
    assert doc["base_is_lab_stand_in"] is True
    assert doc["agent_image"]["archive"] == ARCHIVE
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", doc["agent_image"]["digest"])
    assert "LAB STAND-IN BASE" in release.out


def test_builder_image_archive_is_built_when_the_library_has_one(
    release: Release, repo: Path
) -> None:
    doc = json.loads((release.dist / "release.json").read_text())
    if not (repo / "resources" / "org" / "gpuops" / "agent" / "builder.Containerfile").is_file():
        assert doc["builder_image"] is None
        assert not (release.dist / BUILDER_ARCHIVE).exists()
        return
    labels = image_config(release.dist / BUILDER_ARCHIVE)["config"]["Labels"]
    assert labels["org.gpuops.version"] == LIBRARY_VERSION
    # LAB STAND-IN base (busybox + the host's podman), said in the image and release.json
    assert labels["org.gpuops.base-stand-in"] == "true"
    assert doc["builder_image"]["archive"] == BUILDER_ARCHIVE
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", doc["builder_image"]["digest"])
    assert "image builder is built on busybox" in release.out


def pip_install(venv: Path, wheelhouse: Path, cwd: Path) -> Any:
    made = sh(BASE_PYTHON, "-m", "venv", venv, cwd=cwd)
    assert made.returncode == 0, made.stderr
    return subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--no-index",
            "--find-links",
            str(wheelhouse),
            "--require-hashes",
            "--only-binary",
            ":all:",
            "--no-compile",  # no .pyc: saves CPU here; the files and their hashes are the same
            "-r",
            str(wheelhouse / "requirements.txt"),
        ],
        cwd=cwd,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_installs_offline_from_the_wheelhouse_by_hash(release: Release, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = pip_install(venv, release.dist / "wheelhouse", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    version = sh(venv / "bin" / "gpuops", "--version", cwd=tmp_path, env=offline_env())
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"gpuops {LIBRARY_VERSION}"


def test_tampered_wheel_fails_require_hashes_and_sha256sum(
    release: Release, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(release.dist / "wheelhouse", copy / "wheelhouse")
    sums = [
        line
        for line in (release.dist / "SHA256SUMS").read_text().splitlines()
        if line.split("  ", 1)[1].startswith("wheelhouse/")
    ]
    (copy / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    wheel = next((copy / "wheelhouse").glob(f"gpu_ops_cli-{LIBRARY_VERSION}-*.whl"))
    with wheel.open("ab") as out:
        out.write(b"\0")  # one byte more: a different file, same name
    done = pip_install(tmp_path / "venv", copy / "wheelhouse", tmp_path)
    assert done.returncode != 0
    assert "DO NOT MATCH THE HASHES" in done.stderr, done.stderr
    assert not list((tmp_path / "venv").glob("lib/python3*/site-packages/gpuops"))
    check = sh("sha256sum", "-c", "--quiet", "SHA256SUMS", cwd=copy)
    assert check.returncode != 0
    assert check.stdout.strip() == f"wheelhouse/{wheel.name}: FAILED"


def refused(checkout: Path, **env: str) -> Any:
    done = sh(
        checkout / "scripts" / "release.sh",
        "--lab-base",
        cwd=checkout,
        env={"PYTHON": sys.executable, **env},
    )
    # nothing built, nothing tagged
    assert not (checkout / "dist" / LIBRARY_VERSION).exists()
    return done


def test_dirty_tree_refuses_the_tag(repo: Path, tmp_path: Path) -> None:
    checkout = clone(repo, tmp_path / "dirty")
    (checkout / "stray-notes.txt").write_text("not committed\n")
    done = refused(checkout)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "working tree is dirty" in done.stderr
    assert "stray-notes.txt" in done.stderr
    assert not git(checkout, "tag", "-l", TAG)
    # a changed tracked file is dirty too
    (checkout / "stray-notes.txt").unlink()
    with (checkout / "README.md").open("a") as out:
        out.write("\nedited\n")
    done = refused(checkout)
    assert done.returncode == 3 and "README.md" in done.stderr, done.stderr
    assert not git(checkout, "tag", "-l", TAG)


def test_tag_on_another_commit_refuses_and_is_never_moved(repo: Path, tmp_path: Path) -> None:
    checkout = clone(repo, tmp_path / "moved")
    git(checkout, "tag", "-a", "-m", "an earlier release", TAG)
    earlier = git(checkout, "rev-parse", TAG)  # the tag object
    with (checkout / "README.md").open("a") as out:
        out.write("\na later change\n")
    git(checkout, "commit", "-q", "-am", "a later change")
    done = refused(checkout)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"tag {TAG} exists on commit" in done.stderr and "never moved" in done.stderr
    assert git(checkout, "rev-parse", TAG) == earlier


def test_a_version_is_built_once(repo: Path, tmp_path: Path) -> None:
    checkout = clone(repo, tmp_path / "again")
    built = checkout / "dist" / LIBRARY_VERSION
    built.mkdir(parents=True)
    (built / "SHA256SUMS").write_text("an earlier build\n")
    done = sh(
        checkout / "scripts" / "release.sh",
        "--lab-base",
        cwd=checkout,
        env={"PYTHON": sys.executable},
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "a version is built once" in done.stderr
    assert (built / "SHA256SUMS").read_text() == "an earlier build\n"
    assert sorted(p.name for p in built.iterdir()) == ["SHA256SUMS"]
    assert not git(checkout, "tag", "-l", TAG)


def test_missing_buildah_fails_clearly_and_skips_nothing(repo: Path, tmp_path: Path) -> None:
    checkout = clone(repo, tmp_path / "nobuildah")
    bin_dir = tmp_path / "bin"  # bash and git only: no buildah, no podman
    bin_dir.mkdir()
    for tool in ("bash", "git"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    done = refused(checkout, PATH=str(bin_dir))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "buildah is not installed" in done.stderr
    assert "no release is made" in done.stderr
    assert not git(checkout, "tag", "-l", TAG)
