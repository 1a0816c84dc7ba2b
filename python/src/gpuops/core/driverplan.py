"""The plan of the ``nvidia_driver`` role on one host, from the reading the role's own decision
reads (:mod:`gpuops.core.driverstate`): which of its tasks would change the host, each named as
Ansible's check mode names it (``nvidia_driver : <task>``), with the diff check mode shows for
it, and the task where the host would fail.

The decision is the role's (:func:`driverstate.decide`, the same function its tasks act on);
what this module adds is what check mode of those tasks reports for it: a task that changes
only in a real run (the installer, a reboot) is named by the check-mode task that reports it,
the files ``tasks/nouveau.yml`` writes are compared with what is there (owner, group, mode and
content: the diff is the node's own content against the role's), and the checks that fail a
host before anything changes come back as :class:`Check` for the caller to make on the node
(the repository's ``.run`` and Fabric Manager archive against their sha256). Anything the
reading does not show is planned as a change, never as "as wanted", and its diff is said to be
not shown rather than made up. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core import driverstate
from gpuops.core.driverstate import Decision, FileState, Reading

ROLE = "nvidia_driver"
# The role's tasks the plan names, in the order a run meets them (tasks/main.yml and the
# files it includes). tests/python/unit/test_driverplan.py checks each is a task of the role.
READ_STATE = "Read the driver state"
CHECKSUM = "Check the repository's driver against its sha256 before anything changes"
FM_CHECKSUM = "Check the repository's Fabric Manager against its sha256 before anything changes"
MODPROBE_DIR = "Create the modprobe configuration folder"
BLACKLIST = "Blacklist nouveau"
LSMOD = "See whether nouveau is loaded"
NOUVEAU_REBOOT = "Reboot to unload nouveau"
HEADERS = "Fail when the kernel headers are missing"
TOOLS = "Fail when a build tool is missing"
REPORT_INSTALL = "Report the install a real run would make (check mode)"
REBOOT = "Reboot to load the new driver"
FM_REPORT = "Report the Fabric Manager install a real run would make (check mode)"
CTK_INSTALL = {
    "apt": "Install the container toolkit from the local mirror (apt)",
    "dnf": "Install the container toolkit from the local mirror (dnf)",
    "command": "Report the container toolkit install a real run would make (check mode)",
}
TASKS = (
    READ_STATE,
    CHECKSUM,
    FM_CHECKSUM,
    MODPROBE_DIR,
    BLACKLIST,
    LSMOD,
    NOUVEAU_REBOOT,
    HEADERS,
    TOOLS,
    REPORT_INSTALL,
    REBOOT,
    FM_REPORT,
    *CTK_INSTALL.values(),
)
ROOT = 0  # the files the role writes belong to root (uid and gid 0)


def label(task: str) -> str:
    """A task as Ansible's events name it (role, then task)."""
    return f"{ROLE} : {task}"


@dataclass(frozen=True)
class Written:
    """A path ``tasks/nouveau.yml`` writes, as the role declares it (``vars/main.yml``):
    root's, with ``mode``; ``content`` for a file (None: a folder)."""

    path: str
    mode: int
    content: str | None = None


@dataclass(frozen=True)
class Settings:
    """The role's inputs on one host, as the playbook gives them (pins applied)."""

    driver: str
    repo_url: str  # without a trailing /
    driver_sha256: str
    fabricmanager: str = ""  # "" not managed
    fabricmanager_sha256: str = ""
    container_toolkit: str = ""  # "" not managed
    toolkit_installer: str = "apt"
    blacklist_nouveau: bool = True
    reboot: bool = True
    nvidia_smi: str = "nvidia-smi"
    fact_file: str = ""
    fm_bin_dir: str = ""
    fm_unit: str = ""
    headers_paths: tuple[str, ...] = ()
    required_tools: tuple[str, ...] = ()
    modprobe_dir: Written = Written("/etc/modprobe.d", 0o755)
    blacklist: Written = Written("/etc/modprobe.d/blacklist-nouveau.conf", 0o644, "")

    def script_args(self) -> list[str]:
        """The arguments of ``driver-state.sh`` for everything the plan reads (what
        tasks/state.yml and tasks/install.yml ask, together)."""
        files = [("fact", self.fact_file)]
        if self.blacklist_nouveau:
            files += [("dir", self.modprobe_dir.path), ("blacklist", self.blacklist.path)]
        return driverstate.script_args(
            smi=self.nvidia_smi,
            fm=(self.fm_bin_dir, self.fm_unit) if self.fabricmanager else None,
            ctk=bool(self.container_toolkit),
            lsmod=self.blacklist_nouveau,
            files=files,
            tools=self.required_tools,
            headers=self.headers_paths,
        )


@dataclass(frozen=True)
class Check:
    """A file of the repository to check against its sha256 on the node before anything
    changes (the role's ``gpuops.gpu.driver_checksum``): the same (url, sha256) is checked
    once for every host that needs it."""

    task: str  # the role's task that checks it
    url: str  # may carry user:password@ (never shown)
    name: str  # the file's name, for messages
    sha256: str


@dataclass(frozen=True)
class Step:
    """One task of the role that matters to the plan: ``change`` (reported changed in check
    mode, with its diff, or ``not_shown``: why there is none), ``fail`` (the host fails there:
    ``message``) or ``check`` (fails unless ``check`` passes)."""

    task: str
    kind: str
    diff: Any = None
    not_shown: str = ""
    message: str = ""
    check: Check | None = None


@dataclass
class HostPlan:
    """What the plan says of one host: the changes (task labels, in order), their diffs,
    and the task where it fails ("" none) with why."""

    changes: list[str] = field(default_factory=list)
    diffs: list[dict[str, Any]] = field(default_factory=list)
    failed_task: str = ""
    message: str = ""


def _attrs(path: str, state: FileState, mode: int) -> dict[str, Any] | None:
    """The file module's diff of owner, group and mode (None when they are as wanted)."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for key, have, want in (("owner", state.uid, ROOT), ("group", state.gid, ROOT)):
        if have != want:
            before[key], after[key] = have, want
    if state.mode != mode:
        before["mode"] = None if state.mode is None else f"{state.mode:04o}"
        after["mode"] = f"{mode:04o}"
    if not before:
        return None
    return {"before": {"path": path, **before}, "after": {"path": path, **after}}


def _folder(state: FileState | None, want: Written) -> Step | None:
    """``ansible.builtin.file`` with ``state: directory``, owner/group root and ``mode``."""
    task = label(MODPROBE_DIR)
    if state is None or state.kind not in ("absent", "directory"):
        why = "not read" if state is None else f"it is {state.kind} there"
        return Step(task, "change", not_shown=f"{want.path}: {why}; planned as a change")
    if state.kind == "absent":
        made = {
            "before": {"path": want.path, "state": "absent"},
            "after": {"path": want.path, "state": "directory"},
        }
        return Step(task, "change", made)
    diff = _attrs(want.path, state, want.mode)
    return Step(task, "change", diff) if diff else None


def _copy(state: FileState | None, want: Written) -> Step | None:
    """``ansible.builtin.copy`` of ``content`` to the path, owner/group root and ``mode``: a
    changed content shows as the content diff, else owner/group/mode as the file module's."""
    task, content = label(BLACKLIST), want.content or ""
    if state is None or state.kind not in ("absent", "file"):
        why = "not read" if state is None else f"it is a {state.kind} there"
        return Step(task, "change", not_shown=f"{want.path}: {why}; planned as a change")
    if state.kind == "absent":
        return Step(task, "change", [{"before": "", "after": content, "after_header": want.path}])
    if state.content is None:
        why = f"its content was not read (over {driverstate.CONTENT_LIMIT} bytes, or unreadable)"
        return Step(task, "change", not_shown=f"{want.path}: {why}; planned as a change")
    if state.content != content.encode():
        try:
            before = state.content.decode()
        except UnicodeDecodeError:
            return Step(task, "change", not_shown=f"{want.path}: binary content now")
        header = {"before_header": want.path, "after_header": want.path}
        return Step(task, "change", [{"before": before, "after": content, **header}])
    diff = _attrs(want.path, state, want.mode)
    return Step(task, "change", diff) if diff else None


def steps(reading: Reading, settings: Settings, host: str) -> list[Step]:
    """The role's tasks on ``host`` that change it or may fail it, in the order a check-mode
    run meets them, from ``reading`` (the plan's run of driver-state.sh with
    :meth:`Settings.script_args`)."""
    s = settings
    if not reading.complete:
        why = "the host's state was not read to its end"
        return [Step(label(READ_STATE), "change", not_shown=f"{why}; planned as a change")]
    d: Decision = driverstate.decide(reading, s.driver, s.fabricmanager, s.container_toolkit)
    out: list[Step] = []
    if d.needs_install:
        name = f"NVIDIA-Linux-x86_64-{s.driver}.run"
        check = Check(label(CHECKSUM), f"{s.repo_url}/{name}", name, s.driver_sha256)
        out.append(Step(check.task, "check", check=check))
    if s.fabricmanager and d.fm_needs_install:
        name = f"fabricmanager-linux-x86_64-{s.fabricmanager}-archive.tar.xz"
        url = f"{s.repo_url}/{name}"
        check = Check(label(FM_CHECKSUM), url, name, s.fabricmanager_sha256)
        out.append(Step(check.task, "check", check=check))
    if s.blacklist_nouveau:
        out += [
            step
            for step in (
                _folder(reading.files.get("dir"), s.modprobe_dir),
                _copy(reading.files.get("blacklist"), s.blacklist),
            )
            if step
        ]
        if d.needs_install and d.nouveau_loaded is None:
            out.append(Step(label(LSMOD), "fail", message=driverstate.lsmod_message(reading, host)))
        elif d.needs_install and d.nouveau_loaded and s.reboot:
            out.append(Step(label(NOUVEAU_REBOOT), "change"))
    if d.needs_install:
        pre = driverstate.prereqs(reading, host, s.headers_paths)
        if pre.headers_message:
            out.append(Step(label(HEADERS), "fail", message=pre.headers_message))
        if pre.tools_message:
            out.append(Step(label(TOOLS), "fail", message=pre.tools_message))
        out.append(Step(label(REPORT_INSTALL), "change"))
    if (d.needs_install or d.pending) and (d.pending or d.loaded) and s.reboot:
        out.append(Step(label(REBOOT), "change"))
    if s.fabricmanager and d.fm_needs_start:
        out.append(Step(label(FM_REPORT), "change"))
    if s.container_toolkit and d.ctk_needs_install:
        task = CTK_INSTALL.get(s.toolkit_installer, CTK_INSTALL["apt"])
        shown = (
            ""
            if s.toolkit_installer == "command"
            else (f"what {s.toolkit_installer} would install is not read by the plan")
        )
        out.append(Step(label(task), "change", not_shown=shown))
    return out


def settle(found: Sequence[Step], checks: Mapping[Check, str]) -> HostPlan:
    """The host's plan from its steps and the checks' verdicts (``checks``: check -> "" when
    it passed, else why it failed): the changes up to the first failure, and that failure
    (check mode stops a host at its first failed task)."""
    plan = HostPlan()
    for step in found:
        failed = step.message if step.kind == "fail" else ""
        if step.kind == "check" and step.check is not None:
            failed = checks.get(step.check, "not checked")
        if failed:
            plan.failed_task, plan.message = step.task, failed
            return plan
        if step.kind != "change":
            continue
        plan.changes.append(step.task)
        if step.not_shown:
            plan.diffs.append({"task": step.task, "diff": None, "not_shown": step.not_shown})
        elif step.diff is not None:
            plan.diffs.append({"task": step.task, "diff": step.diff})
    return plan


def checksum_message(check: Check, got: str) -> str:
    """What the role's checksum task says when the file is another one."""
    return (
        f"sha256 of {check.name} is {got}, the inventory wants {check.sha256}: the repository "
        "serves another file than the one reviewed; nothing was changed"
    )
