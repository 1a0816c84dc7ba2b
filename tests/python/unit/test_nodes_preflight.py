"""The pre-flight probe of ``gpuops nodes update`` read by the real ``sh`` and ``curl``: what a
host runs before it changes (HostBefore), whether ``dcgmi`` is there, and whether the
repository holds the .run of the driver it runs now (what a rollback reinstalls).

The host's tools here are test data: small scripts that print what the real ``nvidia-smi``
(its table header; exit 18 with the NVML mismatch text), ``nv-fabricmanager --version`` and
``nvidia-ctk --version`` print. The repository is a folder read through ``file://`` URLs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuops.core import rollout
from gpuops.core.inventory import Host, Inventory
from gpuops.core.nodestate import HostBefore
from gpuops.errors import InvalidInput
from gpuops.usecases.nodes import common, update
from gpuops.usecases.nodes.records import HostRecord, Rollout

#: the first lines of ``nvidia-smi`` on a node running 550.90.07 (its table header)
SMI_550 = """Tue Dec  1 17:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""
#: ``nvidia-smi`` after a newer driver was installed over a loaded module (exit 18)
SMI_MISMATCH = (
    "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.133\n"
)


def _tool(folder: Path, name: str, text: str, rc: int = 0) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\nexit {rc}\n")
    path.chmod(0o755)


def _node(tmp: Path, smi: str | None, rc: int = 0, *, dcgmi: bool = True) -> dict[str, str]:
    """A PATH with the host's tools (and the system's sh, curl, timeout, head)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    if smi is not None:
        _tool(bin_dir, "nvidia-smi", smi, rc)
    if dcgmi:
        _tool(bin_dir, "dcgmi", "dcgmi  version: 4.1.1\n")
    _tool(bin_dir, "nv-fabricmanager", "Fabric Manager version is : 550.90.07\n")
    _tool(
        bin_dir,
        "nvidia-ctk",
        "NVIDIA Container Toolkit CLI version 1.16.2\ncommit: a470818ba7d9166be282cd0039dd2f\n",
    )
    for tool in ("curl", "timeout", "head", "cat"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    return {"PATH": str(bin_dir)}


def _run(script: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["/bin/sh", "-s", "--"],
        check=False,
        input=script,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _repo(tmp: Path, *versions: str) -> str:
    repo = tmp / "repo"
    repo.mkdir()
    for v in versions:
        (repo / f"NVIDIA-Linux-x86_64-{v}.run").write_text("#!/bin/sh\n")
    return f"file://{repo}"


def test_the_probe_reads_what_the_host_runs_and_finds_its_previous_run(tmp_path: Path) -> None:
    env = _node(tmp_path, SMI_550)
    repo = _repo(tmp_path, "570.133.20", "550.90.07")
    out = _run(
        common.probe_script([f"{repo}/NVIDIA-Linux-x86_64-570.133.20.run"], (repo, "570.133.20")),
        env,
    )
    before, dcgmi = common.host_before(out)
    assert before == HostBefore(
        driver="550.90.07",
        cuda="12.4",
        run_file="NVIDIA-Linux-x86_64-550.90.07.run",
        module="loaded",
        fabricmanager="550.90.07",
        container_toolkit="1.16.2",
    )
    assert dcgmi
    assert "@@ok 0" in out and "@@prev-ok 1" in out and "@@alive" in out
    # the previous driver's .run gone from the repository: said so
    (tmp_path / "repo" / "NVIDIA-Linux-x86_64-550.90.07.run").unlink()
    out = _run(common.probe_script([], (repo, "570.133.20")), env)
    assert "@@prev-missing 0" in out
    # the host already runs the wanted driver: no previous .run asked for
    out = _run(common.probe_script([], (repo, "550.90.07")), env)
    assert "@@prev-" not in out and "@@alive" in out


def test_a_module_mismatch_and_a_host_without_a_driver_or_dcgm(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    out = _run(common.probe_script([]), _node(tmp_path / "a", SMI_MISMATCH, 18))
    before, dcgmi = common.host_before(out)
    assert (before.driver, before.cuda, before.module, before.run_file) == (
        None,
        None,
        "mismatch",
        None,
    )
    assert dcgmi
    (tmp_path / "b").mkdir()
    out = _run(common.probe_script([]), _node(tmp_path / "b", None, dcgmi=False))
    before, dcgmi = common.host_before(out)
    assert (before.driver, before.module, dcgmi) == (None, "none", False)


def test_a_secret_in_the_repository_url_never_reaches_a_command_line(tmp_path: Path) -> None:
    """The previous .run's URL is made on the node from the here-document: curl reads it from
    its config on stdin; the script's arguments hold nothing."""
    script = common.probe_script([], ("https://user:s3cret@repo.example/nvidia", "570.133.20"))
    assert "prev-secret https://user:s3cret@repo.example/nvidia/ 570.133.20\n" in script
    assert script.count("s3cret") == 1
    assert "curl -fsI --max-time 10 -o /dev/null -K -" in script


def _inventory(**vars_: object) -> Inventory:
    host = Host(
        "h1",
        ("gpu_nodes", "gpu_h800"),
        {
            "gpu_nodes_driver_version": "570.133.20",
            "gpu_nodes_driver_sha256": {"570.133.20": "a" * 64},
            **vars_,
        },
    )
    return Inventory("inv/hosts.yml", (host,))


def _probe(before: str | None, *, dcgmi: bool = True, missing: bool = False) -> common.Probe:
    b = HostBefore(driver=before, module="loaded" if before else "none")
    gone = {"h1": f"https://repo/NVIDIA-Linux-x86_64-{before}.run"} if missing else {}
    return common.Probe({"h1": True}, {}, {}, 0.1, {"h1": b}, {"h1": dcgmi}, gone)


def _rollout(on: bool = True) -> Rollout:
    ro = Rollout("inv", None, "test", ["nvidia_driver"], rollout.Policy(), False, None)
    ro.rollback = rollout.RollbackPolicy(enabled=on)
    ro.hosts["h1"] = HostRecord("h1", "gpu_h800", None, "570.133.20")
    return ro


def test_a_previous_driver_a_rollback_could_not_reinstall_is_refused() -> None:
    inv = _inventory()
    with pytest.raises(InvalidInput) as no_sha:
        update._check_rollback(_rollout(), inv, _probe("550.90.07"), rollout.RollbackPolicy())
    assert no_sha.value.message == (
        "pre-flight: a failed host could not be rolled back to the driver it runs: h1 runs "
        "550.90.07, no sha256 for it in gpu_nodes_driver_sha256"
    )
    assert no_sha.value.exit_code == 2 and "--no-rollback" in str(no_sha.value.hint)
    inv = _inventory(gpu_nodes_driver_sha256={"570.133.20": "a" * 64, "550.90.07": "b" * 64})
    with pytest.raises(InvalidInput) as gone:
        update._check_rollback(
            _rollout(), inv, _probe("550.90.07", missing=True), rollout.RollbackPolicy()
        )
    assert (
        "h1 runs 550.90.07, not in the repository (https://repo/NVIDIA-Linux" in gone.value.message
    )
    # Fabric Manager goes back with the driver: its archive's sha256 must be known too
    fm = {"gpu_nodes_fabricmanager_version": "570.133.20", "gpu_nodes_fabricmanager_sha256": {}}
    with pytest.raises(InvalidInput) as no_fm:
        update._check_rollback(
            _rollout(),
            _inventory(
                gpu_nodes_driver_sha256={"570.133.20": "a" * 64, "550.90.07": "b" * 64}, **fm
            ),
            _probe("550.90.07"),
            rollout.RollbackPolicy(),
        )
    assert no_fm.value.message.endswith(
        "h1 runs 550.90.07, no sha256 for Fabric Manager 550.90.07 in "
        "gpu_nodes_fabricmanager_sha256"
    )
    # fine: the .run and its sha256 known; no driver before; no change; --no-rollback
    update._check_rollback(_rollout(), inv, _probe("550.90.07"), rollout.RollbackPolicy())
    update._check_rollback(_rollout(), _inventory(), _probe(None), rollout.RollbackPolicy())
    update._check_rollback(_rollout(), _inventory(), _probe("570.133.20"), rollout.RollbackPolicy())
    off = rollout.RollbackPolicy(enabled=False)
    update._check_rollback(_rollout(False), _inventory(), _probe("550.90.07", missing=True), off)


def test_a_group_validating_with_dcgm_needs_dcgmi_on_each_host() -> None:
    with pytest.raises(InvalidInput) as refused:
        update._check_dcgm(_inventory(), _probe("550.90.07", dcgmi=False))
    assert refused.value.message == (
        "pre-flight: group(s) gpu_h800 validate the GPUs with DCGM (gpu_nodes_validation: dcgm, "
        "the default) but dcgmi is not on host(s) h1"
    )
    assert refused.value.exit_code == 2 and refused.value.field == "inventory"
    update._check_dcgm(_inventory(gpu_nodes_validation="none"), _probe("1.1", dcgmi=False))
    update._check_dcgm(
        _inventory(gpu_nodes_validation=["/usr/local/bin/gpu-burn", "60"]),
        _probe("1.1", dcgmi=False),
    )
    update._check_dcgm(_inventory(), _probe("550.90.07", dcgmi=True))


def test_the_playbook_gets_the_pins_and_the_validation_level() -> None:
    from gpuops.core.nodestate import DriverPin

    request = update.UpdateRequest("inv", validation_level=2)
    pins = {"h1": DriverPin("550.90.07", "12.4")}
    assert update._extravars(request, pins, ("nvidia_driver",)) == {
        "update_gpu_nodes_roles": ["nvidia_driver"],
        "gpuops_driver_pins": {"h1": {"version": "550.90.07", "cuda": "12.4"}},
        "gpu_nodes_validation_level": 2,
    }
    assert update._extravars(update.UpdateRequest("inv"), {}) == {
        "update_gpu_nodes_roles": ["node_init", "nvidia_driver"]
    }


def test_a_pinned_host_wants_its_pins_driver() -> None:
    from gpuops.core.nodestate import DriverPin

    ro = _rollout()
    ro.hosts.clear()
    pins = {"h1": DriverPin("550.90.07", "12.4"), "elsewhere": DriverPin("535.161.08")}
    update._records(ro, _inventory(), None, pins)
    assert ro.hosts["h1"].driver_wanted == "550.90.07"  # not its group's 570.133.20
    assert list(ro.hosts) == ["h1"]  # a pin of a host outside the run changes nothing
    update._records(ro, _inventory(), None, {})
    assert ro.hosts["h1"].driver_wanted == "570.133.20"


def _probe_on(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], repo: str, wanted: str = "570.133.20"
) -> common.Probe:
    """common.probe() with its script run by the real ``sh`` here instead of over ssh."""
    from gpuops.adapters import ssh

    def run_here(hosts: list[Host], script: str, *a: object, **kw: object) -> dict[str, ssh.Result]:
        return {h.name: ssh.Result(h.name, 0, _run(script, env), "", 0.1) for h in hosts}

    monkeypatch.setattr(ssh, "run_script", run_here)
    host = Host("h1", ("gpu_nodes",), {"gpu_nodes_driver_repo_url": repo})
    return common.probe([host], check_runs=False, wanted={"h1": wanted}, check_previous=True)


def test_the_probe_reads_the_installed_driver_the_role_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The role's local fact (tasks/install.yml: ``{"version": ...}``) names the driver that
    waits for a reboot while the old module stays loaded (nvidia-smi exit 18)."""
    fact = tmp_path / "gpuops_nvidia_driver.fact"
    fact.write_text('{"version": "570.133.20"}\n')
    monkeypatch.setattr(common, "FACT_FILE", str(fact))
    (tmp_path / "a").mkdir()
    out = _run(common.probe_script([]), _node(tmp_path / "a", SMI_MISMATCH, 18))
    before, _ = common.host_before(out)
    assert (before.module, before.driver, before.installed) == ("mismatch", None, "570.133.20")
    fact.write_text("not json\n")
    (tmp_path / "b").mkdir()
    out = _run(common.probe_script([]), _node(tmp_path / "b", SMI_MISMATCH, 18))
    assert common.host_before(out)[0].installed is None  # unreadable: unknown
    fact.unlink()
    (tmp_path / "c").mkdir()
    out = _run(common.probe_script([]), _node(tmp_path / "c", SMI_MISMATCH, 18))
    assert common.host_before(out)[0].installed is None


def test_a_previous_run_the_host_cannot_look_for_is_unknown_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No curl or wget on the node: whether the repository holds the .run a rollback needs is
    not known (@@prev-unknown), and pre-flight refuses unless --no-rollback."""
    env = _node(tmp_path, SMI_550)
    (tmp_path / "bin" / "curl").unlink()
    repo = _repo(tmp_path, "550.90.07")
    found = _probe_on(monkeypatch, env, repo)
    assert found.missing_previous == {}
    assert found.unchecked_previous == {"h1": f"{repo}/NVIDIA-Linux-x86_64-550.90.07.run"}
    inv = _inventory(gpu_nodes_driver_sha256={"570.133.20": "a" * 64, "550.90.07": "b" * 64})
    with pytest.raises(InvalidInput) as refused:
        update._check_rollback(_rollout(), inv, found, rollout.RollbackPolicy())
    assert "h1 runs 550.90.07; whether the repository holds it cannot be checked" in (
        refused.value.message
    )
    assert "no curl or wget on the host" in refused.value.message
    off = rollout.RollbackPolicy(enabled=False)
    update._check_rollback(_rollout(False), inv, found, off)


def _unread(module: str, installed: str | None = None) -> common.Probe:
    b = HostBefore(driver=None, module=module, installed=installed)
    return common.Probe({"h1": True}, {}, {}, 0.1, {"h1": b}, {"h1": True}, {})


def test_a_host_whose_driver_cannot_be_read_is_refused_unless_no_rollback() -> None:
    """A failed host could not be put back to a driver nobody could read (module unknown,
    nvidia-smi timed out, a mismatch whose installed driver is not the wanted one)."""
    inv = _inventory()
    for probe, says in (
        (_unread("unknown"), "h1: the driver it runs cannot be read (nvidia-smi: unknown)"),
        (_unread("mismatch"), "h1: the driver it runs cannot be read (nvidia-smi: mismatch)"),
        (
            _unread("mismatch", "535.161.08"),
            "h1: the driver it runs cannot be read (nvidia-smi: mismatch)",
        ),
    ):
        with pytest.raises(InvalidInput) as refused:
            update._check_rollback(_rollout(), inv, probe, rollout.RollbackPolicy())
        assert says in refused.value.message and refused.value.exit_code == 2
        assert "--no-rollback" in str(refused.value.hint)
        update._check_rollback(_rollout(False), inv, probe, rollout.RollbackPolicy(enabled=False))
    # no driver at all, or a re-run that finishes the wanted driver's pending reboot: fine
    update._check_rollback(_rollout(), inv, _unread("none"), rollout.RollbackPolicy())
    update._check_rollback(
        _rollout(), inv, _unread("mismatch", "570.133.20"), rollout.RollbackPolicy()
    )


def test_the_downgrade_verdict_goes_into_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuops.core import downgrade
    from gpuops.core.downgrade import DowngradeVerdict
    from gpuops.core.nodestate import DriverChange

    ro = _rollout()
    ro.hosts["h1"].driver_wanted = "535.161.08"
    probe = _probe("550.90.07")
    monkeypatch.setattr(common, "probe", lambda *a, **kw: probe)
    inv = _inventory(gpu_nodes_driver_sha256={"535.161.08": "a" * 64, "550.90.07": "b" * 64})
    down = DriverChange("h1", None, "gpu_h800", "550.90.07", "535.161.08")
    seen: list[list[DriverChange]] = []

    def check(
        kube: object, changes: list[DriverChange], access: object, *, replaced: object
    ) -> DowngradeVerdict:
        assert replaced == ()  # nodes update replaces no Deployment itself
        seen.append(changes)
        return DowngradeVerdict(downgrade.downgrades(changes)[0], [], [])

    monkeypatch.setattr(update.downgrade, "check", check)
    monkeypatch.setattr(update.inventory, "check_stack_pins", lambda *a: None)
    request = update.UpdateRequest("inv", change=("nvidia_driver",))
    update._preflight(ro, inv, request, lambda _: None, None, object())  # type: ignore[arg-type]
    assert seen[0] == [down]
    doc = ro.to_dict()
    assert doc["downgrade"] is not None and doc["downgrade"]["downgrades"][0]["host"] == "h1"
    assert doc["downgrade"]["ok"] is True
    ro = _rollout()  # no driver goes down: nothing judged, nothing said
    probe = _probe("570.133.20")
    update._preflight(ro, _inventory(), request, lambda _: None, None, object())  # type: ignore[arg-type]
    assert ro.to_dict()["downgrade"] is None
