"""The lab registry and image builder, for real: docker-registry + Podman's Docker API."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import docker
import pytest
from integration.conftest_registry import (
    MANIFEST_TYPES,
    RegistryLab,
    down_registry_only,
    pushed_digest,
    split_ref,
    start_registry_lab,
)
from integration.fleetlab import short_lab_dir

from gpuops.errors import OperationFailed
from gpuops_lab import Lab, LabConfig, proc
from gpuops_lab import builder as labbuilder
from gpuops_lab import registry as labregistry
from gpuops_lab.baseimage import BUSYBOX

pytestmark = pytest.mark.lab

# A RUN step executes in the OCI runtime (runc): its output proves that path works.
CHILD_DOCKERFILE = """\
FROM {base}
RUN echo "$((6 * 7))" > /answer && busybox sha256sum /bin/busybox > /busybox.sha256
CMD ["cat", "/answer"]
"""


def _round_trip(rlab: RegistryLab, name: str) -> None:
    """Build FROM the lab base with a RUN step, push, delete locally, pull, run."""
    ref = rlab.ref(name)
    repo, tag = split_ref(ref)
    rlab.build(ref, CHILD_DOCKERFILE.format(base=rlab.base_image))
    digest = pushed_digest(rlab.push(ref))
    assert rlab.manifest_digest(repo, tag) == digest  # what the registry itself says

    rlab.docker.images.remove(ref, force=True)
    with pytest.raises(docker.errors.ImageNotFound):
        rlab.docker.images.get(ref)

    pulled = rlab.docker.images.pull(ref, auth_config=rlab.auth_config)
    assert f"{rlab.url}/{repo}@{digest}" in pulled.attrs["RepoDigests"]
    assert rlab.docker.containers.run(ref, remove=True) == b"42\n"
    sums = rlab.docker.containers.run(ref, ["cat", "/busybox.sha256"], remove=True)
    assert sums.split()[0].decode() == hashlib.sha256(BUSYBOX.read_bytes()).hexdigest()


# -- plain mode ----------------------------------------------------------------------------
def test_base_image_is_in_the_registry_and_has_a_shell(registry_lab: RegistryLab) -> None:
    repo, tag = split_ref(registry_lab.base_image)
    assert registry_lab.manifest_digest(repo, tag) == registry_lab.builder["base_digest"]
    catalog = json.loads(registry_lab.http("GET", "/v2/_catalog").body)
    assert "lab/base" in catalog["repositories"]
    out = registry_lab.docker.containers.run(
        registry_lab.base_image, ["sh", "-c", "echo $((20 + 22)) $(basename $0)"], remove=True
    )
    assert out == b"42 sh\n"


def test_push_and_pull_through_the_podman_api(registry_lab: RegistryLab) -> None:
    _round_trip(registry_lab, "roundtrip")


def test_podman_env_reaches_the_same_storage(registry_lab: RegistryLab) -> None:
    env = {**os.environ, **registry_lab.builder["env"]}
    done = subprocess.run(
        ["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert registry_lab.base_image in done.stdout.split()
    assert Path(registry_lab.builder["socket"]).is_socket()
    assert registry_lab.docker.ping()


def test_retag_by_manifest_get_put_keeps_the_digest(registry_lab: RegistryLab) -> None:
    repo, tag = split_ref(registry_lab.base_image)
    got = registry_lab.http(
        "GET", f"/v2/{repo}/manifests/{tag}", headers={"Accept": MANIFEST_TYPES}
    )
    assert got.status == 200
    digest = got.headers["Docker-Content-Digest"]
    put = registry_lab.http(
        "PUT",
        f"/v2/{repo}/manifests/retagged",
        headers={"Content-Type": got.headers["Content-Type"]},
        data=got.body,
    )
    assert put.status == 201, put.body
    assert put.headers["Docker-Content-Digest"] == digest
    assert registry_lab.manifest_digest(repo, "retagged") == digest
    tags = json.loads(registry_lab.http("GET", f"/v2/{repo}/tags/list").body)["tags"]
    assert {tag, "retagged"} <= set(tags)
    # the reason for the Accept header: without it the registry down-converts to schema1
    plain = registry_lab.http("GET", f"/v2/{repo}/manifests/{tag}")
    assert (
        plain.headers["Content-Type"] == "application/vnd.docker.distribution.manifest.v1+prettyjws"
    )
    assert plain.headers["Docker-Content-Digest"] != digest


def test_registry_stop_and_start_keeps_port_and_data(registry_lab: RegistryLab) -> None:
    lab, port = registry_lab.lab, int(registry_lab.registry["port"])
    repo, tag = split_ref(registry_lab.base_image)
    before = registry_lab.manifest_digest(repo, tag)
    assert before is not None
    ref = registry_lab.ref("during-outage")
    registry_lab.build(ref, f"FROM {registry_lab.base_image}\nLABEL outage=yes\n")

    labregistry.stop_registry(lab)
    try:
        assert not proc.tcp_open("127.0.0.1", port)
        assert labregistry.status(lab)["healthy"] is False
        events = registry_lab.push(ref)
        assert any("error" in e for e in events), events
    finally:
        labregistry.start_registry(lab)

    assert labregistry.status(lab)["healthy"] is True
    assert lab.facts("registry")["port"] == port
    assert registry_lab.manifest_digest(repo, tag) == before  # same data
    digest = pushed_digest(registry_lab.push(ref))  # and it takes pushes again
    assert registry_lab.manifest_digest(*split_ref(ref)) == digest


# -- authenticated mode --------------------------------------------------------------------
def test_auth_registry_speaks_tls_with_the_lab_ca_only(auth_registry_lab: RegistryLab) -> None:
    facts = auth_registry_lab.registry
    assert facts["scheme"] == "https"
    assert Path(facts["ca"]).is_file()
    with pytest.raises(urllib.error.URLError) as err:  # system roots do not know the lab CA
        urllib.request.urlopen(f"{facts['endpoint']}/v2/", timeout=5)  # noqa: S310
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
    assert auth_registry_lab.http("GET", "/v2/", credentials=False).status == 401


def test_auth_registry_refuses_missing_or_wrong_credentials(
    auth_registry_lab: RegistryLab,
) -> None:
    anonymous = auth_registry_lab.http("GET", "/v2/_catalog", credentials=False)
    assert anonymous.status == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Basic realm=")
    wrong = auth_registry_lab.http("GET", "/v2/_catalog", credentials=("gpuops", "not-it"))
    assert wrong.status == 401
    assert auth_registry_lab.http("GET", "/v2/_catalog").status == 200


def test_auth_push_needs_credentials(auth_registry_lab: RegistryLab) -> None:
    ref = auth_registry_lab.ref("needs-auth")
    repo, tag = split_ref(ref)
    auth_registry_lab.build(ref, f"FROM {auth_registry_lab.base_image}\nLABEL auth=yes\n")
    events = auth_registry_lab.push(ref, auth=False)
    errors = " ".join(str(e["error"]) for e in events if "error" in e)
    assert "unauthorized: authentication required" in errors, events  # the registry's 401
    assert auth_registry_lab.manifest_digest(repo, tag) is None  # nothing landed
    digest = pushed_digest(auth_registry_lab.push(ref))
    assert auth_registry_lab.manifest_digest(repo, tag) == digest


def test_auth_round_trip_over_tls(auth_registry_lab: RegistryLab) -> None:
    _round_trip(auth_registry_lab, "tls-roundtrip")


def test_password_stays_out_of_state_and_logs(auth_registry_lab: RegistryLab) -> None:
    lab = auth_registry_lab.lab
    secret = labregistry.password(lab)
    assert len(secret) >= 24
    password_file = Path(auth_registry_lab.registry["password_file"])
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert secret not in lab.state_file.read_text()
    for log_file in (lab.dir / "logs").iterdir():
        assert secret not in log_file.read_text(errors="replace"), log_file


# -- lifecycle -----------------------------------------------------------------------------
def _listening(port: int) -> bool:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False


def test_down_leaves_nothing_behind() -> None:
    rlab = start_registry_lab(short_lab_dir(), auth=True)
    lab = rlab.lab
    port = int(rlab.registry["port"])
    try:
        # a running container: conmon, a runc state, a shm mount under the lab dir
        container = rlab.docker.containers.run(rlab.base_image, ["sleep", "600"], detach=True)
        container.reload()
        inner = int(container.attrs["State"]["Pid"])
        assert proc.alive(inner)
        assert labbuilder.mounts_under(lab.dir)
        assert labbuilder.processes_under(lab.dir)
        pids = [p for p in (proc.pid_of("registry", lab.dir), proc.pid_of("podman", lab.dir)) if p]
        assert len(pids) == 2
        assert _listening(port)
    finally:
        rlab.docker.close()
    lab.state_file.unlink()  # down must not depend on the recorded state

    started = time.monotonic()
    down_registry_only(lab)
    elapsed = time.monotonic() - started

    assert not lab.dir.exists()
    assert not any(proc.alive(p) for p in [*pids, inner])
    assert labbuilder.processes_under(lab.dir) == []
    assert labbuilder.mounts_under(lab.dir) == []
    assert not _listening(port)
    runc_states = [p.read_text() for p in Path("/run/runc").glob("*/state.json")]
    assert not [s for s in runc_states if str(lab.dir) in s]
    assert elapsed < 30
    down_registry_only(lab)  # a second down is harmless
    lab.dir.parent.rmdir()  # mkdtemp's folder, empty now


def test_a_lab_dir_too_long_for_podmans_run_root_is_refused(tmp_path: Path) -> None:
    """Podman's cleanup process refuses a --runroot over 50 characters; the service, which
    reads it from storage.conf, does not, and then waits 20 s for each container's exit code
    (every docker SDK containers.run() of the lab tests took 20 s more). The builder refuses
    such a lab dir instead (pytest's own tmp_path is one)."""
    lab_dir = tmp_path / "lab"
    assert len(str(lab_dir / "builder" / "run")) > labbuilder.MAX_RUNROOT
    lab = Lab(LabConfig(dir=lab_dir))
    try:
        with pytest.raises(OperationFailed, match="too long for Podman: its run root"):
            lab.up(["registry", "builder"])
        assert proc.pid_of("podman", lab.dir) is None  # no service started
    finally:
        down_registry_only(lab)


def test_startup_is_fast(registry_lab: RegistryLab) -> None:
    # warm (base image cached): ~2 s on 2 cores; cold build adds ~2 s
    assert registry_lab.startup_s < 30, registry_lab.startup_s
