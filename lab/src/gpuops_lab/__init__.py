"""The local lab: real registry, image builder, SSH GPU-node fleet and Kubernetes.

``Lab`` starts and stops components in dependency order and records what each one made
(ports, pids, paths) in ``<lab dir>/state.json``, so that ``status`` and ``down`` work from
any later process. ``down`` removes every process, namespace, mount and file the lab made.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

from gpuops.errors import InvalidInput, OperationFailed
from gpuops_lab import proc
from gpuops_lab.spec import DEFAULT_HOSTS, GpuHost, default_fleet

log = logging.getLogger(__name__)

#: Components in start order; ``down`` walks them backwards.
COMPONENTS: tuple[str, ...] = ("registry", "builder", "fleet", "kube")


def default_lab_dir() -> Path:
    return Path(os.environ.get("GPUOPS_LAB_DIR", "/tmp/gpuops-lab"))


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

    # -- state ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        try:
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

    def _save_config(self) -> None:
        state = self.state()
        state.setdefault("config", {"hosts": self.config.hosts})
        self._write(state)

    def _write(self, state: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        tmp.replace(self.state_file)

    def fleet(self) -> list[GpuHost]:
        recorded = self.state().get("config", {}).get("hosts")
        if recorded is not None and recorded != self.config.hosts:
            return default_fleet(int(recorded))
        return self.config.fleet()

    # -- lifecycle -----------------------------------------------------------------------
    def up(self, components: Iterable[str] | None = None) -> dict[str, Any]:
        """Start the named components (all by default); already running ones are kept."""
        wanted = parse_components(list(components) if components is not None else None)
        self.dir.mkdir(parents=True, exist_ok=True)
        state = self.state()
        recorded = state.get("config", {}).get("hosts")
        if recorded is not None and state.get("components") and recorded != self.config.hosts:
            raise InvalidInput(
                f"the lab in {self.dir} runs {recorded} hosts, not {self.config.hosts}",
                hint="run 'gpuops lab down' first to change the fleet size",
            )
        self._save_config()
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

    def down(self) -> dict[str, Any]:
        """Stop everything this lab made and remove its directory. Safe to repeat."""
        stopped = []
        for name in reversed(COMPONENTS):
            _component(name).down(self)
            stopped.append(name)
        proc.stop_all(self.dir)
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        return {"dir": str(self.dir), "stopped": stopped, "removed": not self.dir.exists()}

    def status(self) -> dict[str, Any]:
        comps = self.state().get("components", {})
        return {
            "components": {
                name: {**comps[name], **_component(name).status(self)}
                for name in COMPONENTS
                if name in comps
            }
        }
