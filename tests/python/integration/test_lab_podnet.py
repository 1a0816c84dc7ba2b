"""The lab's pod network (gpuops_lab.kube.podnet) on this machine, for real (root): claimed
per lab, never twice, removed only when provably the lab's own."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuops.errors import OperationFailed
from gpuops_lab.kube import podnet


def _local_routes() -> list[str]:
    out = subprocess.run(
        ["ip", "-j", "-4", "route", "show", "table", "local"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [str(r.get("dst")) for r in json.loads(out)]


def _exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


@pytest.fixture
def labs(tmp_path: Path) -> Iterator[list[tuple[Path, str]]]:
    """Lab dirs (with ids) whose pod networks the test may claim; released afterwards."""
    made = [(tmp_path / f"lab{i}", uuid.uuid4().hex) for i in range(2)]
    yield made
    for lab_dir, lab_id in made:
        podnet.release(lab_dir, lab_id)


def test_a_claimed_pod_network_is_local_and_goes_with_its_interface(
    labs: list[tuple[Path, str]],
) -> None:
    lab_dir, lab_id = labs[0]
    net = podnet.claim(lab_dir, lab_id)
    try:
        assert net.interface == podnet.interface_name(lab_dir)
        assert Path(f"/sys/class/net/{net.interface}/ifalias").read_text().strip() == (
            podnet.alias(lab_id)
        )
        assert net.cidr in _local_routes()
        cidr = ipaddress.ip_network(net.cidr)
        assert cidr in podnet.POOL
        # any pod IP in it can be bound and reached, as the API server's proxy reaches it
        ip = str(cidr.network_address + 7)
        with socket.create_server((ip, 0)) as server:
            port = server.getsockname()[1]
            with socket.create_connection((ip, port), timeout=2):
                pass
        assert podnet.owned(lab_dir, lab_id) is not None
        assert podnet.owned(lab_dir, uuid.uuid4().hex) is None  # another lab's id
    finally:
        assert podnet.release(lab_dir, lab_id)
    assert not _exists(net.interface)
    assert net.cidr not in _local_routes()
    assert not podnet.release(lab_dir, lab_id)  # again: nothing left to do


def test_two_labs_never_share_a_pod_network(
    labs: list[tuple[Path, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    (a_dir, a_id), (b_dir, b_id) = labs
    first = podnet.claim(a_dir, a_id)
    order = [ipaddress.IPv4Network(first.cidr), *podnet.POOL]
    monkeypatch.setattr(podnet, "candidates", lambda _d: order)
    # a route overlapping the first lab's network makes it taken
    second = podnet.claim(b_dir, b_id)
    assert second.cidr != first.cidr
    podnet.release(b_dir, b_id)
    # and when two labs check at the same moment, the route itself is the claim: the
    # second gets "File exists" from the kernel and takes the next one
    monkeypatch.setattr(podnet, "free", lambda _c, _r: True)
    raced = podnet.claim(b_dir, b_id)
    assert raced.cidr != first.cidr
    assert first.cidr in _local_routes() and raced.cidr in _local_routes()


def test_an_interface_of_the_lab_name_that_is_not_the_labs_is_left_alone(
    labs: list[tuple[Path, str]],
) -> None:
    lab_dir, lab_id = labs[0]
    name = podnet.interface_name(lab_dir)
    subprocess.run(["ip", "link", "add", "name", name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", "dev", name, "alias", "someone else's"], check=True)
        with pytest.raises(OperationFailed, match="is not this lab's"):
            podnet.claim(lab_dir, lab_id)
        assert not podnet.release(lab_dir, lab_id)
        assert _exists(name)
    finally:  # made by this test, above
        subprocess.run(["ip", "link", "del", "dev", name], check=True)
