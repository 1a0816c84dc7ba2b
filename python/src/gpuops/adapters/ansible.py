"""Ansible as gpuops uses it: the inventory (Ansible's own rules) and playbooks run through
ansible-runner.

Why ansible-runner and not ``ansible-playbook`` with its output parsed: ansible-runner (what
AWX and Ansible Tower are built on) gives a structured event per task and host as it happens
(for the progress lines and the per-host report), a status and rc, and an artifacts folder
(``job_events/*.json``, ``stdout``) that a Jenkins step archives and a person can replay. The
text output of ``ansible-playbook`` is for people: it changes between versions and callbacks.

Secrets: the SSH key reaches Ansible as a file path in ``ANSIBLE_PRIVATE_KEY_FILE`` (bound by
the Jenkins step's ``withCredentials``), never as an argument; errors are built from our words.
"""

from __future__ import annotations

import configparser
import contextlib
import io
import json
import logging
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuops import content, fsio
from gpuops.adapters.hostkeys import INVENTORY_FILE, LEARNED_FILE, HostKeys
from gpuops.core.inventory import HOST_VARS, Host, Inventory
from gpuops.core.values import shown
from gpuops.errors import GpuOpsError, InvalidInput, OperationFailed
from gpuops.fsio import OutDir

log = logging.getLogger(__name__)

#: Environment variables the Jenkins step binds the SSH key and user to (S-25).
KEY_FILE_ENV = "GPUOPS_SSH_KEY_FILE"
USER_ENV = "GPUOPS_SSH_USER"


def _plain(value: Any) -> Any:
    """Ansible's tagged values as plain Python values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool | None):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


#: Largest file of an inventory gpuops lets Ansible read (inventories are configuration).
MAX_INVENTORY_FILE = 16 << 20


def load_inventory(path: str, limit: str | None = None, pattern: str = "gpu_nodes") -> Inventory:
    """The hosts of ``pattern`` in the inventory at ``path``, narrowed by ``limit``.

    A missing or unparsable inventory, or a limit matching no host, is an input error naming
    the option; the message is ours (an inventory can hold secrets)."""
    source = Path(path)
    try:
        source.stat()
    except FileNotFoundError:
        raise InvalidInput(
            f"inventory {shown(path)} does not exist",
            hint="pass --inventory PATH (a file or an inventory folder)",
            field="inventory",
        ) from None
    except (OSError, ValueError) as exc:  # a name too long, a loop of links, a NUL byte
        raise InvalidInput(
            f"inventory {shown(path)} cannot be read ({getattr(exc, 'strerror', None) or exc})",
            field="inventory",
        ) from None
    # Ansible reads the files itself: a device or FIFO among them would hang it
    fsio.check_readable_tree(source, cap=MAX_INVENTORY_FILE, what="inventory", option="inventory")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
    os.environ.setdefault("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "True")
    try:
        from ansible.errors import AnsibleError  # noqa: PLC0415 - heavy; only when used
        from ansible.inventory.manager import InventoryManager  # noqa: PLC0415
        from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
        from ansible.template import Templar  # noqa: PLC0415
        from ansible.vars.manager import VariableManager  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a dependency of the wheel
        raise OperationFailed("ansible-core is not installed", hint="reinstall gpuops") from None
    # Ansible says what it could not parse on stderr, before our result or error document, and
    # quoting the inventory (which can hold secrets): its words are kept out, ours say it.
    said = io.StringIO()
    try:
        with (
            contextlib.redirect_stderr(said),
            contextlib.redirect_stdout(said),
            _lookups_refused() as tried,
        ):
            loader = DataLoader()
            manager = _static_inventory(InventoryManager, loader, str(source))
            variables = VariableManager(loader=loader, inventory=manager)
            everything = manager.get_hosts(pattern)
            if limit:
                manager.subset(limit)
            selected = manager.get_hosts(pattern)
    except (AnsibleError, _LookupRefused):
        raise InvalidInput(
            f"inventory {path} cannot be parsed as a static Ansible inventory (YAML, INI or "
            "TOML files): gpuops reads static inventories only (no inventory plugins such as "
            "constructed, no inventory scripts), so nothing runs on the controller while it reads",
            hint=f"check it with: ansible-inventory -i {path} --graph",
            field="inventory",
        ) from None
    if tried:  # pragma: no cover - a static source templates nothing
        raise InvalidInput(f"inventory {path}: a source needs a lookup", field="inventory")
    if said.getvalue():
        log.debug(
            "ansible-core said %d line(s) loading the inventory (not shown: it can hold secrets)",
            len(said.getvalue().splitlines()),
        )
    if not everything:
        raise InvalidInput(
            f"inventory {path} has no host in group {shown(pattern)}",
            hint="GPU nodes belong to gpu_nodes (S-6), one child group per GPU model",
            field="inventory",
        )
    if not selected:
        raise InvalidInput(
            f"limit {shown(limit)} matches no host of group {shown(pattern)} in {path}",
            hint=f"hosts: {', '.join(h.name for h in everything[:10])}"
            + (" ..." if len(everything) > 10 else ""),
            field="limit",
        )
    hosts = []
    for host in selected:
        found = variables.get_vars(host=host, include_hostvars=False)
        for name in REFUSED_HOST_VARS:
            if name in found:
                raise InvalidInput(
                    f"inventory {path}: host {host.name}: variable {name} is refused: it "
                    "replaces the ssh options gpuops sets (host keys checked)",
                    hint="use ansible_ssh_common_args or ansible_ssh_extra_args: gpuops' "
                    "options come before them, and ssh takes the first value given",
                    field="inventory",
                )
        templar = Templar(loader=loader, variables=found)
        wanted = {
            k: _read_only_value(templar, found[k], f"inventory {path}: host {host.name}", k)
            for k in HOST_VARS
            if k in found
        }
        groups = tuple(str(g) for g in found.get("group_names", ()))
        hosts.append(Host(name=str(host.name), groups=groups, vars=wanted))
    return Inventory(path=str(source), hosts=tuple(hosts), limit=limit)


#: The inventory plugins gpuops lets Ansible use while gpuops reads an inventory: files only,
#: parsed, never run (no ``script``, no ``constructed``, no ``auto`` of a collection's plugin).
STATIC_PLUGINS = ("yaml", "ini", "toml")
#: Files in a folder inventory that are not inventory sources (the host keys beside it).
NOT_SOURCES = (INVENTORY_FILE, LEARNED_FILE)
#: The same, as a regular expression for ``ANSIBLE_INVENTORY_IGNORE_REGEX`` (a list: no comma).
NOT_SOURCES_REGEX = r"^known_hosts(\.learned)?$"
#: Host variables that replace what gpuops gives ssh (``ANSIBLE_SSH_ARGS``, the ssh program).
REFUSED_HOST_VARS = ("ansible_ssh_args", "ansible_ssh_executable")


def _static_inventory(manager_class: Any, loader: Any, source: str) -> Any:
    """An InventoryManager of ``source`` that parses with :data:`STATIC_PLUGINS` only and
    skips the known-hosts files in a folder inventory. Done on the manager itself, not with
    ``ANSIBLE_INVENTORY_ENABLED`` / ``ANSIBLE_INVENTORY_IGNORE_REGEX``: ansible-core 2.19 reads
    those once, when ``ansible.constants`` (and ``ansible.inventory.manager``) are first
    imported, so setting them later in this process would change nothing."""
    from ansible.errors import AnsibleError  # noqa: PLC0415
    from ansible.plugins.loader import inventory_loader  # noqa: PLC0415
    from ansible.utils.path import unfrackpath  # noqa: PLC0415

    top = unfrackpath(source, follow=False)

    class StaticInventory(manager_class):  # type: ignore[misc]
        def _fetch_inventory_plugins(self) -> list[Any]:
            plugins = [p for p in (inventory_loader.get(n) for n in STATIC_PLUGINS) if p]
            if not plugins:  # pragma: no cover - ansible-core ships them
                raise AnsibleError("no static inventory plugin available")
            return plugins

        def parse_source(self, source: str, cache: bool = False) -> bool:
            if source != top and Path(source).name in NOT_SOURCES:
                return False
            parsed = bool(super().parse_source(source, cache=cache))
            # a file no static plugin parsed is an error here, whatever Ansible's
            # INVENTORY_*_UNPARSED settings were when it was first imported in this process
            if not parsed and not Path(source).is_dir():
                raise AnsibleError("an inventory source no static inventory plugin parses")
            return parsed

    return StaticInventory(loader=loader, sources=[source])


class _LookupRefused(Exception):
    """Raised by the lookup loader while gpuops reads the inventory (see
    :func:`_lookups_refused`)."""


@contextlib.contextmanager
def _lookups_refused() -> Iterator[list[str]]:
    """Ansible's templating with every lookup refused (``lookup``, ``query``/``q``: pipe, env,
    file, ... and any collection's): each one asks the lookup loader for its plugin, and here
    the loader refuses and records the name. ansible-core 2.19 ignores ``disable_lookups``,
    so the loader is where it is stopped; an ansible-core whose templating does not go through
    it is refused (fail closed), never read with lookups live. Yields the names tried."""
    from ansible._internal._templating import _jinja_plugins  # noqa: PLC0415
    from ansible.plugins import loader as plugin_loader  # noqa: PLC0415

    lookups: Any = getattr(plugin_loader, "lookup_loader", None)
    known = lookups is not None and getattr(_jinja_plugins, "lookup_loader", None) is lookups
    if not known:
        raise OperationFailed(
            "this ansible-core templates lookups in a way gpuops does not know: the inventory "
            "is not read (its lookups could run on the controller)",
            hint="install the ansible-core of gpuops' lock file",
        )
    tried: list[str] = []

    def refuse(name: Any, *_: Any, **__: Any) -> Any:
        tried.append(str(name))
        raise _LookupRefused(str(name))

    lookups.get = refuse
    lookups.get_with_context = refuse
    try:
        yield tried
    finally:
        del lookups.get
        del lookups.get_with_context


def _read_only_value(templar: Any, value: Any, where: str, name: str) -> Any:
    """One host variable gpuops reads, templated as Ansible would (``{{ other_var }}``,
    filters) but with lookups refused, as a plain value. A value that needs a lookup, or that
    cannot be templated, is an input error naming host and variable (never the value: an
    inventory can hold secrets)."""
    from ansible.errors import AnsibleError, AnsibleUndefinedVariable  # noqa: PLC0415

    failed: str | None = None
    with _lookups_refused() as tried:
        try:
            plain = _plain(templar.template(value))  # _plain inside: containers are lazy
        except AnsibleUndefinedVariable:
            failed = "it uses a variable that is not defined"
        except (AnsibleError, _LookupRefused):
            failed = "it cannot be templated"
    if tried:
        raise InvalidInput(
            f"{where}: variable {name} needs a lookup ({shown(tried[0], 40)}) to resolve; "
            "gpuops reads the inventory with lookups disabled, so nothing runs on the "
            "controller while it only reads",
            hint="give it a plain value, or compose it from other variables ({{ other_var }})",
            field="inventory",
        )
    if failed is not None:
        raise InvalidInput(f"{where}: variable {name}: {failed}", field="inventory")
    return plain


# -- playbooks --------------------------------------------------------------------------------
@dataclass
class HostRun:
    """What one playbook run did on one host."""

    host: str
    ok: int = 0
    changed: int = 0
    failed: bool = False
    unreachable: bool = False
    skipped: int = 0
    failed_task: str = ""
    message: str = ""
    changed_tasks: list[str] = field(default_factory=list)
    task_seconds: dict[str, float] = field(default_factory=dict)
    diffs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        return "changed" if self.changed else "unchanged"


@dataclass
class PlaybookRun:
    ident: str
    rc: int
    status: str
    hosts: dict[str, HostRun]
    artifacts: str
    elapsed_s: float


Progress = Callable[[str, str, str, float | None], None]  # host, status, task, seconds


def _message(res: Mapping[str, Any]) -> str:
    """A failed task's message in one line: the module's msg and, for a command, what it
    said on stderr (an installer's own error), else its output's last line."""
    text = str(res.get("msg") or "").strip()
    lines = [
        line.strip()
        for line in str(res.get("stderr") or res.get("module_stderr") or "").splitlines()
        if line.strip()
    ]
    if not lines and res.get("stdout"):
        lines = [str(res["stdout"]).strip().splitlines()[-1]]
    said = " ".join(lines)
    text = f"{text}: {said}" if text and said else (text or said)
    return " ".join(text.split())[:800]


class _Events:
    def __init__(self, progress: Progress | None, host_keys: HostKeys | None = None) -> None:
        self.hosts: dict[str, HostRun] = {}
        self.progress = progress
        self.host_keys = host_keys or HostKeys()

    def __call__(self, event: Mapping[str, Any]) -> bool:
        kind = str(event.get("event", ""))
        data = event.get("event_data") or {}
        name = data.get("host")
        if not name or not kind.startswith("runner_on_"):
            return True
        run = self.hosts.setdefault(str(name), HostRun(str(name)))
        res = data.get("res") or {}
        task = str(data.get("task") or "")
        role = data.get("role")
        label = f"{role} : {task}" if role else task
        seconds = data.get("duration")
        if isinstance(seconds, int | float):
            run.task_seconds[label] = round(run.task_seconds.get(label, 0.0) + seconds, 3)
        if kind == "runner_on_ok":
            run.ok += 1
            if res.get("changed"):
                run.changed += 1
                run.changed_tasks.append(label)
                diff = res.get("diff")
                if diff:
                    run.diffs.append({"task": label, "diff": _plain(diff)})
                self._say(run.host, "changed", label, seconds)
        elif kind == "runner_on_skipped":
            run.skipped += 1
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            run.failed, run.failed_task, run.message = True, label, _message(res)
            self._say(run.host, "failed", label, seconds)
        elif kind == "runner_on_unreachable":
            refused = self.host_keys.refusal(run.host, run.host, str(res.get("msg") or ""))
            run.unreachable, run.failed_task = True, label
            run.message = refused or _message(res)
            self._say(run.host, "unreachable", label, seconds)
        return True

    def _say(self, host: str, status: str, task: str, seconds: Any) -> None:
        if self.progress:
            self.progress(host, status, task, seconds if isinstance(seconds, float) else None)


# -- configuration ----------------------------------------------------------------------------
#: Ansible's own default of [ssh_connection] ssh_args (kept when a site's config sets none).
DEFAULT_SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s"
DEFAULT_COLLECTIONS_PATH = "~/.ansible/collections:/usr/share/ansible/collections"
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class AnsibleConfig:
    """The one ansible.cfg Ansible reads, and whether it is the site's own."""

    path: Path
    site: bool
    parser: configparser.ConfigParser

    def get(self, section: str, key: str) -> str | None:
        value = self.parser.get(section, key, raw=True, fallback=None)
        return value.strip() if value and value.strip() else None


def site_config() -> Path | None:
    """The site's ansible.cfg as Ansible finds it: ``ANSIBLE_CONFIG`` (a file, or a folder
    holding ansible.cfg) when set, else ``./ansible.cfg`` (not in a world-writable folder,
    which Ansible skips); None when there is neither."""
    given = os.environ.get("ANSIBLE_CONFIG")
    if given:
        path = Path(given).expanduser().absolute()
        return path / "ansible.cfg" if path.is_dir() else path
    try:
        cwd = Path.cwd()
        if cwd.stat().st_mode & stat.S_IWOTH:
            return None
        here = cwd / "ansible.cfg"
        return here if here.exists() else None
    except OSError:  # no working directory: Ansible finds none there either
        return None


def ansible_config() -> AnsibleConfig:
    """The site's ansible.cfg (read and parsed: exit 2 naming it when it is not a readable
    config), else the one gpuops ships."""
    site = site_config()
    path = site or content.ansible_dir() / "ansible.cfg"
    what = "ansible.cfg (ANSIBLE_CONFIG)" if os.environ.get("ANSIBLE_CONFIG") else "ansible.cfg"
    text = fsio.read_text(path, cap=MAX_CONFIG_BYTES, what=what, option="ansible_config")
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        raise InvalidInput(
            f"{what} {shown(str(path), 200)} is not an INI file Ansible can read",
            field="ansible_config",
        ) from None
    return AnsibleConfig(path, site is not None, parser)


def config_env(
    host_keys: HostKeys | None = None, config: AnsibleConfig | None = None
) -> dict[str, str]:
    """The environment of a playbook run: Ansible reads one config file, the site's own
    ansible.cfg when it has one (else the shipped one), and what gpuops needs is applied over
    it as ``ANSIBLE_*`` variables, which win over any config file: host keys checked against
    the command's known-hosts file (its ssh options first: ssh takes the first value given,
    so neither the site's ssh_args nor an inventory's ``ansible_ssh_common_args`` /
    ``ansible_ssh_extra_args`` can turn it off; an inventory's ``ansible_ssh_args`` or
    ``ansible_ssh_executable`` would replace them, and :func:`load_inventory` refuses those),
    the known-hosts files in a folder inventory not read as inventory sources (added to the
    site's own ignore patterns), gpuops' roles and collection found, no colour, no retry
    files."""
    cfg = config or ansible_config()
    shipped = content.ansible_dir()
    ssh_args = (
        os.environ.get("ANSIBLE_SSH_ARGS")
        or cfg.get("ssh_connection", "ssh_args")
        or DEFAULT_SSH_ARGS
    )
    paths = (
        os.environ.get("ANSIBLE_COLLECTIONS_PATH")
        or cfg.get("defaults", "collections_path")
        or cfg.get("defaults", "collections_paths")
        or DEFAULT_COLLECTIONS_PATH
    )
    collections = [str(shipped / "collections")] + [
        str(cfg.path.parent / Path(p).expanduser()) if not p.startswith(("/", "~")) else p
        for p in paths.split(os.pathsep)
        if p
    ]
    ignore = [
        p.strip()
        for p in (
            os.environ.get("ANSIBLE_INVENTORY_IGNORE_REGEX")
            or cfg.get("defaults", "inventory_ignore_patterns")
            or cfg.get("inventory", "ignore_patterns")
            or ""
        ).split(",")
        if p.strip()
    ]
    keys = host_keys or HostKeys()
    sockets = Path(cfg.get("ssh_connection", "control_path_dir") or "~/.ansible/cp")
    return {
        "ANSIBLE_CONFIG": str(cfg.path),
        # ssh master connections per host-key policy (see HostKeys.policy_id)
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(sockets.expanduser() / keys.policy_id()),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": f"{keys.ansible_ssh_args()} {ssh_args}",
        "ANSIBLE_INVENTORY_IGNORE_REGEX": ",".join(dict.fromkeys([*ignore, NOT_SOURCES_REGEX])),
        "ANSIBLE_ROLES_PATH": str(shipped / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(dict.fromkeys(collections)),
    }


def run_playbook(
    playbook: str,
    inventory: str,
    hosts: list[str],
    *,
    data_dir: OutDir,
    ident: str,
    extravars: Mapping[str, Any] | None = None,
    check: bool = False,
    forks: int = 50,
    timeout_s: int = 3600,
    progress: Progress | None = None,
    host_keys: HostKeys | None = None,
) -> PlaybookRun:
    """Run a shipped playbook on exactly ``hosts``; ansible-runner's artifacts (events, stdout,
    status, rc, the command line) are copied into ``data_dir/artifacts/ident``."""
    import ansible_runner  # noqa: PLC0415 - heavy; only when used

    env = config_env(host_keys)
    key, user = os.environ.get(KEY_FILE_ENV), os.environ.get(USER_ENV)
    if key:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = key
    if user:
        env["ANSIBLE_REMOTE_USER"] = user
    events = _Events(progress, host_keys)
    cmdline = "--check --diff" if check else "--diff"
    # the ansible-playbook of this installation (a venv's bin is often not on PATH)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/bin:/bin")])
    if shutil.which("ansible-playbook", path=env["PATH"]) is None:
        raise OperationFailed(
            "ansible-playbook is not installed beside gpuops", hint="reinstall gpuops"
        )
    data_dir.fd  # noqa: B018 - the folder exists now, made by the one writer, never through a link
    started = time.monotonic()
    # ansible-runner reads env/{envvars,extravars,settings,ssh_key,passwords} of its private
    # data dir: a fresh folder only gpuops writes, never the artifacts folder (which others
    # can write to); its artifacts are copied there afterwards.
    with fsio.private_tempdir("gpuops-ansible-") as private:
        runner, failed = _run_runner(
            ansible_runner.run,
            private_data_dir=str(private.path),
            ident=ident,
            playbook=str(content.playbook(playbook)),
            inventory=str(Path(inventory).resolve()),
            limit=",".join(hosts),
            extravars=dict(extravars or {}),
            envvars=env,
            cmdline=cmdline,
            forks=min(forks, max(1, len(hosts))),
            timeout=timeout_s,
            event_handler=events,
            quiet=True,
            suppress_env_files=True,
        )
        _scrub(private, ident)
        copied = _copy_artifacts(private, data_dir, ident)
    if runner is None:
        raise OperationFailed(
            f"ansible-runner could not run playbook {playbook} ({failed})",
            hint=f"see the artifacts in {copied}",
        )
    for name in hosts:
        events.hosts.setdefault(name, HostRun(name))
    rc = int(runner.rc if runner.rc is not None else -1)
    if rc != 0 and not any(h.ok or h.failed or h.unreachable for h in events.hosts.values()):
        raise OperationFailed(
            f"ansible-playbook {playbook} did not run (status {runner.status}, exit {rc})",
            hint=f"see {copied / 'stdout'}",
        )
    return PlaybookRun(
        ident=ident,
        rc=rc,
        status=str(runner.status),
        hosts=events.hosts,
        artifacts=str(copied),
        elapsed_s=round(time.monotonic() - started, 3),
    )


def _run_runner(run: Callable[..., Any], **kwargs: Any) -> tuple[Any, str]:
    """``run(**kwargs)``, and None with the exception's type name when it raised (its text is
    not shown: it can quote the environment)."""
    try:
        return run(**kwargs), ""
    except Exception as exc:  # ansible-runner's own errors
        return None, type(exc).__name__


#: Largest artifact file copied out of ansible-runner's private folder (its stdout, an event).
MAX_ARTIFACT_FILE = 1 << 30


def _copy_artifacts(private: OutDir, data_dir: OutDir, ident: str) -> Path:
    """``artifacts/<ident>/`` of ansible-runner's private folder into ``data_dir`` (the same
    path below it) through the one writer; regular files only, links never followed."""
    source = private.path / "artifacts" / ident
    with data_dir.subdir("artifacts") as artifacts, artifacts.subdir(ident) as target:
        for folder, dirs, files in os.walk(source, followlinks=False):
            where = Path(folder).relative_to(source)
            dirs[:] = sorted(d for d in dirs if not Path(folder, d).is_symlink())
            out = target
            opened = []
            for part in where.parts:
                out = out.subdir(part)
                opened.append(out)
            try:
                for name in sorted(files):
                    data = _regular_bytes(Path(folder, name))
                    if data is not None:
                        out.save_bytes(name, data)
            finally:
                for one in opened:
                    one.close()
        return target.path


def _regular_bytes(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file itself (not a link), else None."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        return fsio.read_bytes(path, cap=MAX_ARTIFACT_FILE, what="ansible-runner artifact")
    except (OSError, GpuOpsError):
        return None


def _scrub(data_dir: OutDir, ident: str) -> None:
    """ansible-runner records the whole process environment in ``artifacts/<ident>/command``;
    a Jenkins step archives that folder and credentials live in the environment: keep only
    the command line."""
    try:
        folder = data_dir.subdir("artifacts").subdir(ident)
    except GpuOpsError:
        return  # ansible-runner wrote no artifacts
    with folder:
        try:
            doc = json.loads(folder.file("command").read_text())
            folder.save_json("command", {"command": doc.get("command"), "cwd": doc.get("cwd")})
        except FileNotFoundError:
            return
        except (OSError, ValueError, AttributeError, GpuOpsError):
            with contextlib.suppress(GpuOpsError):  # unreadable: its content is not kept
                folder.save_json("command", {"command": None, "cwd": None})
