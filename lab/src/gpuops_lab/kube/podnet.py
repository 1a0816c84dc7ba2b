"""The lab cluster's pod network: kwok's pod IPs made real, local addresses.

kwok writes every pod's IP from its ``--cidr`` pool (``10.x.0.1``, ``.2``, ... in creation
order; a deleted pod's IP goes back to the pool and is handed out again); nothing answered
at those addresses before. So that the API server's pod proxy
(``/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/...``) reaches the lab's app stand-in
(:mod:`gpuops_lab.appstandin`) as it reaches a container, each lab gets a pod network of its
own, in the root network namespace where the API server runs:

* a /16 out of :data:`POOL` (10.128.0.0/16 ... 10.191.0.0/16: apart from the service range
  10.96.0.0/16, kwok's default 10.244.0.0/16 and the fleet's 10.200.0.0/16), the first tried
  derived from the lab directory, skipping every /16 that overlaps a route of this machine
  (another lab's included);
* an interface of the lab's own, ``<lab prefix>-p`` (a bridge without ports: this kernel has
  no ``dummy``), whose alias names the lab's id, so that only this lab ever removes it;
* a ``local`` route for the /16 on that interface (table ``local``): every address in it is
  an address of this machine, so a process may bind any pod IP (AnyIP) and nothing else is
  configured per pod. Adding the route is the claim: a second lab adding the same /16 gets
  "File exists" and takes the next one.

The API server proxies only to global unicast addresses (not loopback, not link-local): 10/8
is. Deleting the interface removes the route; :func:`release` deletes it only when its alias
carries this lab's id.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuops.errors import OperationFailed
from gpuops_lab import netns

log = logging.getLogger(__name__)

#: The /16s a lab's pod network is taken from (second octet 128..191).
POOL: tuple[ipaddress.IPv4Network, ...] = tuple(
    ipaddress.IPv4Network(f"10.{n}.0.0/16") for n in range(128, 192)
)
#: The lab's other networks, never handed out even if the machine has no route for them.
RESERVED: tuple[ipaddress.IPv4Network, ...] = (
    ipaddress.IPv4Network("10.96.0.0/16"),  # the service range (controlplane.SERVICE_CIDR)
    ipaddress.IPv4Network("10.200.0.0/16"),  # the fleet (netns.GATEWAY)
    ipaddress.IPv4Network("10.244.0.0/16"),  # kwok's default --cidr
)
ALIAS_PREFIX = "gpuops-lab pod network of lab "


@dataclass(frozen=True)
class PodNet:
    """What :func:`claim` made: the interface (name, index) and the pod CIDR."""

    interface: str
    ifindex: int
    cidr: str

    def to_dict(self) -> dict[str, str | int]:
        return {"interface": self.interface, "ifindex": self.ifindex, "cidr": self.cidr}


def interface_name(lab_dir: Path) -> str:
    """``gol-<hash>-p``: the lab's prefix (as its fleet namespaces), 12 characters."""
    return f"{netns.prefix_for(lab_dir)}-p"


def alias(lab_id: str) -> str:
    return ALIAS_PREFIX + lab_id


def candidates(lab_dir: Path) -> list[ipaddress.IPv4Network]:
    """Every /16 of :data:`POOL`, starting at one derived from the lab directory."""
    digest = hashlib.sha256(str(lab_dir.resolve()).encode()).digest()
    first = int.from_bytes(digest[:4], "big") % len(POOL)
    return [*POOL[first:], *POOL[:first]]


def free(candidate: ipaddress.IPv4Network, routes: Iterable[ipaddress.IPv4Network]) -> bool:
    """Whether ``candidate`` overlaps no route (a default route aside) and no lab network."""
    taken = [r for r in routes if r.prefixlen > 0]
    return not any(candidate.overlaps(r) for r in (*taken, *RESERVED))


def parse_routes(doc: Sequence[dict[str, object]]) -> list[ipaddress.IPv4Network]:
    """The destinations of ``ip -j -4 route show table all`` (``default`` dropped)."""
    out = []
    for route in doc:
        dst = str(route.get("dst", ""))
        if not dst or dst == "default":
            continue
        try:
            out.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
        except ValueError:
            continue
    return out


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise OperationFailed(
            f"ip {' '.join(args)} failed: {res.stderr.strip()}",
            hint="the lab's pod network needs root and iproute2 (scripts/setup.sh system)",
        )
    return res


def _routes() -> list[ipaddress.IPv4Network]:
    res = _ip("-j", "-4", "route", "show", "table", "all")
    return parse_routes(json.loads(res.stdout or "[]"))


def _link(name: str) -> dict[str, object] | None:
    res = _ip("-j", "link", "show", "dev", name, check=False)
    if res.returncode != 0:
        return None
    links = json.loads(res.stdout or "[]")
    return links[0] if links else None


def owned(lab_dir: Path, lab_id: str) -> dict[str, object] | None:
    """The lab's pod-network interface if it exists and its alias names this lab."""
    link = _link(interface_name(lab_dir))
    if link is None or link.get("ifalias") != alias(lab_id):
        return None
    return link


def claim(lab_dir: Path, lab_id: str) -> PodNet:
    """Create the lab's interface and claim a free /16 of :data:`POOL` on it."""
    name = interface_name(lab_dir)
    existing = _link(name)
    if existing is not None:
        if existing.get("ifalias") != alias(lab_id):
            raise OperationFailed(
                f"network interface {name} exists and is not this lab's (alias "
                f"{existing.get('ifalias')!r}): refusing to touch it",
                hint="another lab directory with the same hash? remove it yourself if stale",
            )
        release(lab_dir, lab_id)  # a crashed start of this very lab: start afresh
    _ip("link", "add", "name", name, "type", "bridge")
    try:
        _ip("link", "set", "dev", name, "alias", alias(lab_id), "up")
    except BaseException:
        _ip("link", "del", "dev", name, check=False)  # made by the line above, unmarked
        raise
    try:
        return _claim_route(lab_dir, name)
    except BaseException:
        release(lab_dir, lab_id)
        raise


def _claim_route(lab_dir: Path, name: str) -> PodNet:
    link = _link(name)
    if link is None:
        raise OperationFailed(f"network interface {name} vanished right after its creation")
    for cidr in candidates(lab_dir):
        if not free(cidr, _routes()):
            continue
        res = _ip(
            "route", "add", "local", str(cidr), "dev", name, "table", "local",
            "proto", "static", check=False,
        )  # fmt: skip
        if res.returncode == 0:
            log.info("lab pod network %s on %s", cidr, name)
            return PodNet(name, int(str(link["ifindex"])), str(cidr))
        if "File exists" not in res.stderr:
            raise OperationFailed(f"claiming the pod network {cidr}: {res.stderr.strip()}")
    raise OperationFailed(
        f"no free /16 for the lab's pod network among {POOL[0]} ... {POOL[-1]}",
        hint="other labs (or this machine's routes) use them all; stop some labs",
    )


def release(lab_dir: Path, lab_id: str | None) -> bool:
    """Delete the lab's interface (and with it its route) if its alias names this lab;
    True if one was deleted. An interface of that name that is not provably ours stays."""
    if lab_id is None:
        return False
    name = interface_name(lab_dir)
    if owned(lab_dir, lab_id) is None:
        link = _link(name)
        if link is not None:
            log.warning("leaving network interface %s: its alias is not this lab's", name)
        return False
    _ip("link", "del", "dev", name)
    return True
