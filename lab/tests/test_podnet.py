"""How a lab picks its pod network (gpuops_lab.kube.podnet): pure units. Creating and
removing it for real (root) is in tests/python/integration/test_lab_podnet.py."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from gpuops_lab.kube import podnet

net = ipaddress.IPv4Network


def test_candidates_are_the_whole_pool_starting_where_the_lab_dir_says(tmp_path: Path) -> None:
    a, b = podnet.candidates(tmp_path / "a"), podnet.candidates(tmp_path / "b")
    assert sorted(a) == sorted(podnet.POOL) == sorted(b)
    assert a == podnet.candidates(tmp_path / "a")  # deterministic
    assert len({str(n) for n in podnet.POOL}) == 64
    for cidr in podnet.POOL:
        assert cidr.prefixlen == 16 and cidr.subnet_of(net("10.0.0.0/8"))
        assert not any(cidr.overlaps(r) for r in podnet.RESERVED)


def test_a_network_any_route_overlaps_is_not_free() -> None:
    cidr = net("10.150.0.0/16")
    assert podnet.free(cidr, [net("0.0.0.0/0"), net("192.0.2.0/24"), net("127.0.0.0/8")])
    assert not podnet.free(cidr, [net("10.150.0.0/16")])  # another lab's claim
    assert not podnet.free(cidr, [net("10.0.0.0/8")])  # a machine's wide route
    assert not podnet.free(cidr, [net("10.150.3.4/32")])  # a single address in it
    assert not podnet.free(net("10.244.0.0/16"), [])  # kwok's default range
    assert not podnet.free(net("10.200.0.0/16"), [])  # the fleet's


def test_routes_are_read_from_ip_json() -> None:
    doc = [
        {"dst": "default", "gateway": "192.0.2.1"},
        {"dst": "192.0.2.0/24", "dev": "eth0"},
        {"type": "local", "dst": "127.0.0.1", "table": "local"},
        {"type": "local", "dst": "10.150.0.0/16", "table": "local"},
        {"dst": "not-an-address"},
        {},
    ]
    assert podnet.parse_routes(doc) == [
        net("192.0.2.0/24"),
        net("127.0.0.1/32"),
        net("10.150.0.0/16"),
    ]


def test_the_interface_name_carries_the_lab_prefix_and_fits_the_kernel(tmp_path: Path) -> None:
    name = podnet.interface_name(tmp_path / "lab")
    assert name.startswith("gol-") and name.endswith("-p")
    assert len(name) <= 15  # IFNAMSIZ - 1
    assert podnet.alias("0" * 32).endswith("0" * 32)
