"""What the ``nvidia_driver`` role finds on a GPU node and what it decides from it (S-13 ...
S-15): one reading, one decision, for the role and for ``gpuops nodes update``'s plan.

The role's ``files/driver-state.sh`` reads the node (read-only, no Python there) and prints
``@@`` lines: :func:`parse` makes them a :class:`Reading`; :func:`decide` says what the role
will do with it (install the driver, only reboot into it, install or restart Fabric Manager,
install the container toolkit) and :func:`prereqs` whether the installer's prerequisites are
there. The role calls both through its filters (``filter_plugins/driver_state.py``) and its
tasks act on the result; the plan calls them on the same script's output, read over ssh. So
what the plan says a host needs is what the role decides, by construction. Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: the role's script, relative to the Ansible content folder
SCRIPT = "roles/nvidia_driver/files/driver-state.sh"
#: nvidia-smi's exit status when the loaded module and the installed library differ (an
#: installed driver waits for a reboot)
SMI_MISMATCH = 18
_DRIVER = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?")
_LEADING_DIGIT = re.compile(r"[0-9]")
_FM_VERSION = re.compile(r"Fabric Manager version is *: *([0-9][0-9.]*)")
CTK_LINE = "NVIDIA Container Toolkit CLI version "
#: the largest file the script shows the content of (bytes)
CONTENT_LIMIT = 8192


@dataclass(frozen=True)
class FileState:
    """A path on the node: ``kind`` absent, file, directory, link, other or unknown (stat
    failed); owner, group, permission bits and size; ``content`` when it could be read (a
    regular file of at most :data:`CONTENT_LIMIT` bytes), else None."""

    kind: str
    uid: int | None = None
    gid: int | None = None
    mode: int | None = None
    size: int | None = None
    content: bytes | None = None


@dataclass
class Reading:
    """What ``driver-state.sh`` printed, section by section (None: that section not read)."""

    smi_rc: int | None = None
    smi: list[str] = field(default_factory=list)
    files: dict[str, FileState] = field(default_factory=dict)
    fm: list[str] | None = None  # nv-fabricmanager --version, then systemctl is-active
    ctk: list[str] | None = None  # nvidia-ctk --version
    lsmod_rc: int | None = None
    modules: list[str] = field(default_factory=list)
    release: str | None = None  # uname -r
    found: list[str] = field(default_factory=list)  # header folders that exist
    missing: list[str] = field(default_factory=list)  # build tools not on PATH
    complete: bool = False  # the script's last line was seen
    unknown_lines: int = 0


def script_args(
    *,
    smi: str | None = None,
    fact: str | None = None,
    fm: tuple[str, str] | None = None,
    ctk: bool = False,
    lsmod: bool = False,
    files: Sequence[tuple[str, str]] = (),
    tools: Sequence[str] = (),
    headers: Sequence[str] = (),
) -> list[str]:
    """The script's arguments (``KEY=VALUE`` words) for the sections wanted: ``fm`` is
    (bin dir, unit), ``files`` (tag, path) with tags ``fact``, ``dir``, ``blacklist``."""
    out = [f"smi={smi}"] if smi else []
    out += [f"fact={fact}"] if fact else []
    out += [f"fm={fm[0]}", f"fm_unit={fm[1]}"] if fm else []
    out += ["ctk=1"] if ctk else []
    out += ["lsmod=1"] if lsmod else []
    out += [f"{tag}={path}" for tag, path in files]
    out += [f"tool={t}" for t in tools] + [f"headers={h}" for h in headers]
    return out


def _int(text: str, base: int = 10) -> int | None:
    try:
        return int(text, base)
    except ValueError:
        return None


def _file(words: list[str]) -> FileState:
    if len(words) == 1 and words[0] in ("absent", "unknown"):
        return FileState(words[0])
    if len(words) != 5 or words[0] not in ("file", "directory", "link", "other"):
        return FileState("unknown")
    kind, uid, gid, mode, size = words
    return FileState(kind, _int(uid), _int(gid), _int(mode, 8), _int(size))


def parse(stdout: str) -> Reading:
    """The script's output as a :class:`Reading`; lines it does not know are counted, not
    trusted (a section they would belong to stays as read without them)."""
    r = Reading()
    b64: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word == "@@smi-rc":
            r.smi_rc = _int(rest.strip())
        elif word == "@@smi":
            r.smi.append(rest)
        elif word == "@@read" and rest.strip() in ("fm", "ctk"):
            setattr(r, rest.strip(), [])
        elif word == "@@fm" and r.fm is not None:
            r.fm.append(rest)
        elif word == "@@ctk" and r.ctk is not None:
            r.ctk.append(rest)
        elif word == "@@lsmod-rc":
            r.lsmod_rc = _int(rest.strip())
        elif word == "@@mod":
            r.modules.append(rest.strip())
        elif word == "@@file" and rest.split():
            tag, *words = rest.split()
            r.files[tag] = _file(words)
        elif word == "@@content" and rest.strip():
            b64[rest.strip()] = []
        elif word == "@@b64" and rest.partition(" ")[0] in b64:
            tag, _, payload = rest.partition(" ")
            b64[tag].append(payload.strip())
        elif word == "@@release":
            r.release = rest.strip()
        elif word == "@@found":
            r.found.append(rest)
        elif word == "@@missing":
            r.missing.append(rest)
        elif word == "@@end":
            r.complete = True
        else:
            r.unknown_lines += 1
    for tag, parts in b64.items():
        state = r.files.get(tag)
        if state is None or state.kind != "file":
            continue
        try:
            content = base64.b64decode("".join(parts), validate=True)
        except (binascii.Error, ValueError):
            continue
        if state.size is None or len(content) == state.size:
            r.files[tag] = FileState(**{**asdict(state), "content": content})
    return r


@dataclass(frozen=True)
class Decision:
    """What the role does on a host, decided from its reading (tasks/state.yml consumes it):

    - ``needs_install``: the wanted driver is not what runs (nvidia-smi answers with another
      version or not at all), unless only a reboot into it is pending;
    - ``pending``: nvidia-smi says "Driver/library version mismatch" and the role's fact
      says it installed the wanted version: only the reboot is missing;
    - Fabric Manager (where wanted): ``fm_needs_install`` when its version is not the
      wanted one, ``fm_needs_start`` also when the driver changes or its unit is not active;
    - ``ctk_needs_install``: ``nvidia-ctk --version`` does not name the wanted version;
    - ``nouveau_loaded``: None when ``lsmod`` could not be read.
    A section that could not be read counts as "needs the change" (never as "as wanted")."""

    loaded: str  # the loaded driver ("": none readable)
    installed: str | None  # the role's fact ("": none; None: there but not readable)
    needs_install: bool
    pending: bool
    fm_installed: str = ""
    fm_needs_install: bool = False
    fm_needs_start: bool = False
    ctk_needs_install: bool = False
    nouveau_loaded: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def installed_version(state: FileState | None) -> str | None:
    """The version in the role's local fact (``{"version": "570.133.20"}``): "" when there is
    no fact, None when there is one that cannot be read as that."""
    if state is None or state.kind == "absent":
        return ""
    if state.content is None:
        return None
    try:
        doc = json.loads(state.content.decode())
    except (UnicodeDecodeError, ValueError):
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    return version if isinstance(version, str) and _DRIVER.fullmatch(version) else None


def decide(
    reading: Reading, driver: str, fabricmanager: str = "", container_toolkit: str = ""
) -> Decision:
    """What the role does for the wanted ``driver`` (and Fabric Manager / container toolkit
    versions, "" when not managed), from ``reading``."""
    rc = reading.smi_rc
    loaded = next((x for x in reading.smi if _LEADING_DIGIT.match(x)), "") if rc == 0 else ""
    installed = installed_version(reading.files.get("fact"))
    if rc == 0:
        needs_install = loaded != driver
    elif rc == SMI_MISMATCH:
        needs_install = installed != driver
    else:  # no driver, no nvidia-smi, a failure or a timeout: (re)install
        needs_install = True
    pending = rc == SMI_MISMATCH and installed == driver
    fm_lines = reading.fm or []
    found = _FM_VERSION.search("\n".join(fm_lines))
    fm_installed = found.group(1) if found else ""
    fm_install = bool(fabricmanager) and fm_installed != fabricmanager
    fm_start = bool(fabricmanager) and (
        fm_install or needs_install or pending or fm_lines[-1:] != ["active"]
    )
    ctk = bool(container_toolkit) and CTK_LINE + container_toolkit not in (reading.ctk or [])
    nouveau = None if reading.lsmod_rc != 0 else "nouveau" in reading.modules
    return Decision(
        loaded, installed, needs_install, pending, fm_installed, fm_install, fm_start, ctk, nouveau
    )


@dataclass(frozen=True)
class Prereqs:
    """The installer's prerequisites on the node: the running kernel's release, the header
    folders looked in (``{release}`` filled in) and those found, the build tools missing.
    ``headers_message`` / ``tools_message``: the failure, "" when there is none."""

    release: str
    searched: list[str]
    found: list[str]
    missing_tools: list[str]
    headers_message: str
    tools_message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prereqs(reading: Reading, host: str, headers: Sequence[str]) -> Prereqs:
    """Whether the NVIDIA installer can build its module on ``host``: a folder of the running
    kernel's headers among ``headers`` (a link counts) and every build tool asked for."""
    release = reading.release or ""
    searched = [h.replace("{release}", release) for h in headers]
    headers_message = tools_message = ""
    if not reading.found:
        headers_message = (
            f"prerequisite missing on {host}: no headers for the running kernel {release} "
            f"(looked in {', '.join(searched)}); install linux-headers-{release} "
            f"(Debian/Ubuntu) or kernel-devel-{release} (RHEL) from the local mirror"
        )
    if reading.missing:
        tools_message = (
            f"prerequisite missing on {host}: {', '.join(reading.missing)} not found; the "
            "NVIDIA installer builds its kernel module with them (install them from the local "
            "mirror)"
        )
    return Prereqs(
        release,
        searched,
        list(reading.found),
        list(reading.missing),
        headers_message,
        tools_message,
    )


def lsmod_message(reading: Reading, host: str) -> str:
    """Why whether nouveau is loaded is not known ("" when it is)."""
    if reading.lsmod_rc == 0:
        return ""
    said = "not run" if reading.lsmod_rc is None else f"exited {reading.lsmod_rc}"
    return (
        f"lsmod could not be read on {host} ({said}): whether nouveau is loaded, which blocks "
        "the NVIDIA installer, is not known"
    )
