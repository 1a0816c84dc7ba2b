"""The local lab: real registry, image builder, SSH GPU-node fleet and Kubernetes.

``Lab`` starts and stops components in dependency order and records what each one made
(ports, pids, paths) in ``<lab dir>/state.json``, so that ``status`` and ``down`` work from
any later process. ``down`` removes every process, namespace, mount and file the lab made.

The lab runs as root, so it acts only on what it can prove it made: ``up`` creates the lab
directory and marks it (``.gpuops-lab``: an id, a regular file of ours); ``down``, ``status``
and a second ``up`` refuse a directory without that mark (:class:`~gpuops.errors.InvalidInput`,
exit 2, naming it).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

from gpuops.errors import InvalidInput, OperationFailed
from gpuops_lab import proc, safefiles
from gpuops_lab.spec import DEFAULT_HOSTS, GpuHost, default_fleet

log = logging.getLogger(__name__)

#: Components in start order; ``down`` walks them backwards. ``apps`` (the app stand-in)
#: needs ``kube``; ``prometheus`` scrapes ``apps`` and ``pushgateway`` when they run;
#: ``alertmanager`` stands alone.
COMPONENTS: tuple[str, ...] = (
    "registry",
    "builder",
    "fleet",
    "kube",
    "apps",
    "pushgateway",
    "prometheus",
    "alertmanager",
)


#: The file ``up`` writes into the directory it creates: what makes a directory a lab.
MARKER = ".gpuops-lab"
LAB_DIR_ENV = "GPUOPS_LAB_DIR"
DEFAULT_LAB_DIR = Path("/tmp/gpuops-lab")
_LAB_ID = re.compile(r"[0-9a-f]{32}")


def lab_dir_value(value: str, what: str = "lab dir") -> Path:
    """A lab directory as given (``--dir``, ``$GPUOPS_LAB_DIR``, ``lab_dir``): never empty,
    made absolute against the current directory once, here."""
    if not value or not value.strip():
        raise InvalidInput(
            f"{what} is empty: an empty value never means the current directory",
            hint=f"give a path, e.g. {DEFAULT_LAB_DIR}, or leave it unset for that default",
        )
    # absolute and normalised, but symlinks not resolved: a linked lab dir must show as one
    return Path(os.path.normpath(Path(value).absolute()))


def default_lab_dir() -> Path:
    """``$GPUOPS_LAB_DIR``, else /tmp/gpuops-lab; a variable set but empty is an input error."""
    value = os.environ.get(LAB_DIR_ENV)
    if value is None:
        return DEFAULT_LAB_DIR
    if not value.strip():
        raise InvalidInput(
            f"{LAB_DIR_ENV} is set but empty: an empty value never means the current directory",
            hint=f"unset {LAB_DIR_ENV} (default {DEFAULT_LAB_DIR}) or set it to the lab's path",
        )
    return lab_dir_value(value, LAB_DIR_ENV)


def default_cache_dir() -> Path:
    return Path(os.environ.get("GPUOPS_CACHE", Path.home() / ".cache" / "gpuops"))


def _is_checkout(path: Path) -> bool:
    return (path / "lab" / "kube" / "go.mod").is_file() and (path / "scripts").is_dir()


def repo_root() -> Path:
    """The gpu-ops checkout, needed only to build the Kubernetes binaries (``lab/kube``,
    ``scripts/build-kube.sh``): ``$GPUOPS_REPO``, else the checkout this package was installed
    from (editable), else the current directory or one of its parents."""
    env = os.environ.get("GPUOPS_REPO")
    if env:
        if not _is_checkout(Path(env)):
            raise InvalidInput(
                f"GPUOPS_REPO={env} is not a gpu-ops checkout (no lab/kube/go.mod there)",
                hint="point GPUOPS_REPO at a clone of gpu-ops, or unset it",
            )
        return Path(env)
    cwd = Path.cwd().resolve()
    for parent in (*Path(__file__).resolve().parents, cwd, *cwd.parents):
        if _is_checkout(parent):
            return parent
    raise OperationFailed(
        "building the lab's Kubernetes binaries needs a gpu-ops checkout (lab/kube, scripts/); "
        f"none found above {cwd} or the installed gpuops_lab package",
        hint="run from inside a clone, set GPUOPS_REPO to one, or build the binaries once "
        "with scripts/build-kube.sh (they are cached in $GPUOPS_CACHE)",
    )


@dataclass
class LabConfig:
    dir: Path = field(default_factory=default_lab_dir)
    cache: Path = field(default_factory=default_cache_dir)
    hosts: int = DEFAULT_HOSTS
    extra_nodes: int = 0
    registry_auth: bool = False

    def fleet(self) -> list[GpuHost]:
        return default_fleet(self.hosts)


class Component(Protocol):
    def up(self, lab: Lab) -> dict[str, Any]: ...
    def down(self, lab: Lab) -> None: ...
    def status(self, lab: Lab) -> dict[str, Any]: ...


def _component(name: str) -> Component:
    module: ModuleType = importlib.import_module(f"gpuops_lab.{name}")
    return cast(Component, module)


def parse_components(value: str | Iterable[str] | None) -> list[str]:
    if value is None or value == "all":
        return list(COMPONENTS)
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip() for n in names if n.strip()]
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown or not names:
        raise InvalidInput(
            f"unknown lab component(s): {', '.join(unknown) or '(none given)'}",
            hint=f"choose from {', '.join(COMPONENTS)} or 'all'",
        )
    return [c for c in COMPONENTS if c in names]


class Lab:
    """A lab rooted at ``config.dir``; its state survives between processes."""

    def __init__(self, config: LabConfig | None = None) -> None:
        self.config = config or LabConfig()
        self.dir = self.config.dir
        self.state_file = self.dir / "state.json"

    # -- the mark ------------------------------------------------------------------------
    @property
    def marker(self) -> Path:
        return self.dir / MARKER

    def lab_id(self) -> str | None:
        """The id in the lab's mark; None when the directory does not exist; InvalidInput
        when it exists and is not a lab this user's ``gpuops lab up`` made."""
        refuse = f"{self.dir} is not a gpuops lab"
        try:
            info = self.dir.lstat()
        except FileNotFoundError:
            return None
        except OSError as exc:  # too long a name, a path through a file, ...
            raise InvalidInput(
                f"{refuse}: {exc.strerror or type(exc).__name__}",
                hint="give the lab's path (--dir / GPUOPS_LAB_DIR / lab_dir)",
            ) from None
        if stat.S_ISLNK(info.st_mode):
            raise InvalidInput(
                f"{refuse}: it is a symlink (a lab directory never is); refusing to touch it",
                hint="give the lab's real path (--dir / GPUOPS_LAB_DIR / lab_dir)",
            )
        lab_id = _mark_id(self.marker)
        if lab_id is None:
            raise InvalidInput(
                f"{refuse} (no valid {MARKER} mark written by 'gpuops lab up'): refusing to "
                "touch it",
                hint="lab commands act only on a directory 'gpuops lab up' created; check "
                "--dir / GPUOPS_LAB_DIR / lab_dir",
            )
        return lab_id

    def claim(self) -> str:
        """Create and mark the lab directory, or check the mark of an existing one; its id."""
        existing = self.lab_id()
        if existing is not None:
            return existing
        try:
            self.dir.parent.mkdir(parents=True, exist_ok=True)
            self.dir.mkdir(mode=0o755)
        except FileExistsError:  # made meanwhile by someone else: only a lab is accepted
            return self._require_lab()
        except OSError as exc:
            raise InvalidInput(
                f"cannot create the lab directory {self.dir}: {exc.strerror or type(exc).__name__}",
                hint="give a path in a writable directory (--dir / GPUOPS_LAB_DIR / lab_dir)",
            ) from None
        lab_id = uuid.uuid4().hex
        doc = {"id": lab_id, "dir": str(self.dir), "created": round(time.time(), 3)}
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with os.fdopen(os.open(self.marker, flags, 0o644), "w") as out:
            json.dump(doc, out)
        return lab_id

    def _require_lab(self) -> str:
        lab_id = self.lab_id()
        if lab_id is None:
            raise OperationFailed(f"the lab directory {self.dir} does not exist (any more)")
        return lab_id

    # -- state ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        try:
            if self.state_file.is_symlink():
                return {}
            return cast(dict[str, Any], json.loads(self.state_file.read_text()))
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as exc:
            raise OperationFailed(f"lab state {self.state_file} is unreadable: {exc}") from exc

    def facts(self, component: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.state().get("components", {}).get(component, {}))

    def _record(self, component: str, facts: dict[str, Any] | None) -> None:
        state = self.state()
        state.setdefault("config", {"hosts": self.config.hosts})
        comps = state.setdefault("components", {})
        if facts is None:
            comps.pop(component, None)
        else:
            comps[component] = facts
        self._write(state)

    def save_config(self) -> None:
        state = self.state()
        state.setdefault("config", {"hosts": self.config.hosts})
        self._write(state)

    def _write(self, state: dict[str, Any]) -> None:
        """state.json, replaced atomically by rename: never written through a symlink."""
        self._require_lab()
        safefiles.write_atomic(self.state_file, json.dumps(state, indent=2, sort_keys=True))

    def fleet(self) -> list[GpuHost]:
        recorded = self.state().get("config", {}).get("hosts")
        if recorded is not None and recorded != self.config.hosts:
            return default_fleet(int(recorded))
        return self.config.fleet()

    # -- lifecycle -----------------------------------------------------------------------
    def up(self, components: Iterable[str] | None = None) -> dict[str, Any]:
        """Start the named components (all by default); already running ones are kept."""
        wanted = parse_components(list(components) if components is not None else None)
        self.claim()
        state = self.state()
        recorded = state.get("config", {}).get("hosts")
        if recorded is not None and state.get("components") and recorded != self.config.hosts:
            raise InvalidInput(
                f"the lab in {self.dir} runs {recorded} hosts, not {self.config.hosts}",
                hint="run 'gpuops lab down' first to change the fleet size",
            )
        self.save_config()
        timings: dict[str, float] = {}
        for name in wanted:
            comp = _component(name)
            current = self.facts(name)
            if current and comp.status(self).get("healthy"):
                timings[name] = 0.0
                continue
            if current:  # half-started or died: clean before starting again
                comp.down(self)
            started = time.monotonic()
            try:
                facts = comp.up(self)
            except BaseException:
                log.warning("lab component %s failed to start; cleaning it up", name)
                comp.down(self)
                self._record(name, None)
                raise
            timings[name] = round(time.monotonic() - started, 3)
            self._record(name, facts)
        return {"dir": str(self.dir), "started_s": timings, **self.status()}

    def stop(self, components: Iterable[str]) -> list[str]:
        """Stop the named components (in reverse start order) and forget their facts; the
        others and the lab directory stay. The names stopped."""
        names = parse_components(list(components))
        self._require_lab()
        for name in reversed(names):
            _component(name).down(self)
            self._record(name, None)
        return list(reversed(names))

    def down(self) -> dict[str, Any]:
        """Stop everything this lab made and remove its directory. Safe to repeat; a
        directory that is not a lab (no mark of ours) is refused, untouched."""
        if self.lab_id() is None:
            return {"dir": str(self.dir), "stopped": [], "removed": False}
        stopped = []
        for name in reversed(COMPONENTS):
            _component(name).down(self)
            stopped.append(name)
        proc.stop_all(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        return {"dir": str(self.dir), "stopped": stopped, "removed": not self.dir.exists()}

    def status(self) -> dict[str, Any]:
        if self.lab_id() is None:
            return {"components": {}}
        comps = self.state().get("components", {})
        return {
            "components": {
                name: {**comps[name], **_component(name).status(self)}
                for name in COMPONENTS
                if name in comps
            }
        }


def _mark_id(marker: Path) -> str | None:
    """The id in a lab mark: a regular file (not a link) of this user holding {"id": hex}."""
    try:
        info = marker.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        doc = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    lab_id = doc.get("id") if isinstance(doc, dict) else None
    return lab_id if isinstance(lab_id, str) and _LAB_ID.fullmatch(lab_id) else None
