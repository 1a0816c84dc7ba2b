"""The nvidia_driver role's state script, its decision and the plan made from them
(gpuops.core.driverstate, gpuops.core.driverplan): the script run for real with ``sh`` on this
machine against stand-in programs in a temporary folder, the decision as the role decided it
before it moved into the core (its Jinja, case by case), and what the plan names and shows.
That the plan picks what check mode picks on real hosts: test_nodes_plan_lab.py."""

from __future__ import annotations

import base64
import importlib.util
import os
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gpuops.core import driverplan, driverstate
from gpuops.core.driverplan import Check, Settings, Written
from gpuops.core.inventory import ROLE_DEFAULTS_READ

ROLE = Path(__file__).resolve().parents[3] / "ansible/roles/nvidia_driver"
SCRIPT = ROLE / "files/driver-state.sh"
CONF = "blacklist nouveau\noptions nouveau modeset=0\n"
BLACKLIST = Written("/etc/modprobe.d/blacklist-nouveau.conf", 0o644, CONF)


def _plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "driver_state", ROLE / "filter_plugins/driver_state.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reading(**kw: Any) -> str:
    """A script output: smi (rc, lines), fact (content or None), fm / ctk lines, modules."""
    out = [f"@@smi-rc {kw.get('rc', 0)}", *(f"@@smi {v}" for v in kw.get("smi", ["550.90.07"]))]
    fact = kw.get("fact")
    if fact is None:
        out.append("@@file fact absent")
    else:
        out += [f"@@file fact file 0 0 644 {len(fact)}", "@@content fact"]
        out.append("@@b64 fact " + base64.b64encode(fact.encode()).decode())
    if "fm" in kw:
        out += ["@@read fm", *(f"@@fm {v}" for v in kw["fm"])]
    if "ctk" in kw:
        out += ["@@read ctk", *(f"@@ctk {v}" for v in kw["ctk"])]
    out += [f"@@lsmod-rc {kw.get('lsmod_rc', 0)}", "@@mod Module", "@@mod nvidia"]
    out += [f"@@mod {m}" for m in kw.get("modules", [])]
    out += [*kw.get("extra", []), "@@release 6.8.0-1", "@@found /usr/src/linux-headers-6.8.0-1"]
    return "\n".join(out + (["@@end"] if kw.get("complete", True) else [])) + "\n"


def settings(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "driver": "570.133.20",
        "repo_url": "http://repo",
        "driver_sha256": "a" * 64,
        "headers_paths": ("/usr/src/linux-headers-{release}",),
        "required_tools": ("gcc",),
        "blacklist": BLACKLIST,
        "toolkit_installer": "command",
    }
    return Settings(**{**base, **kw})


FM_OK = ["Fabric Manager version is : 570.133.20", "active"]
FACT = '{"version": "570.133.20"}\n'


# --- the decision: the role's Jinja before it moved (tasks/state.yml, fabricmanager_state.yml,
# toolkit.yml), case by case -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("case", "kw", "needs", "pending", "loaded"),
    [
        ("at the wanted version", {"smi": ["570.133.20"] * 2}, False, False, "570.133.20"),
        ("below it", {"smi": ["550.90.07"]}, True, False, "550.90.07"),
        ("above it", {"smi": ["580.65.06"]}, True, False, "580.65.06"),
        (
            "first line that starts with a digit",
            {"smi": ["No devices", "570.133.20"]},
            False,
            False,
            "570.133.20",
        ),
        ("rc 0, nothing readable", {"smi": ["garbage"]}, True, False, ""),
        (
            "mismatch, the wanted one installed",
            {"rc": 18, "smi": [], "fact": FACT},
            False,
            True,
            "",
        ),
        (
            "mismatch, another installed",
            {"rc": 18, "fact": '{"version": "550.90.07"}'},
            True,
            False,
            "",
        ),
        ("mismatch, no fact", {"rc": 18}, True, False, ""),
        ("mismatch, a fact that is not JSON", {"rc": 18, "fact": "570.133.20"}, True, False, ""),
        ("no driver loaded", {"rc": 9, "smi": []}, True, False, ""),
        ("a lost GPU (nvidia-smi unreadable)", {"rc": 15, "smi": ["570.133.20"]}, True, False, ""),
        ("no nvidia-smi", {"rc": 127, "smi": []}, True, False, ""),
    ],
)
def test_the_driver_decision_is_the_roles(
    case: str, kw: dict[str, Any], needs: bool, pending: bool, loaded: str
) -> None:
    d = driverstate.decide(driverstate.parse(reading(**kw)), "570.133.20")
    assert (d.needs_install, d.pending, d.loaded) == (needs, pending, loaded), case


def test_a_section_not_read_counts_as_needing_the_change() -> None:
    d = driverstate.decide(driverstate.parse("@@end\n"), "570.133.20", "570.133.20", "1.17.8")
    assert (d.needs_install, d.fm_needs_install, d.fm_needs_start, d.ctk_needs_install) == (
        True,
        True,
        True,
        True,
    )
    assert d.nouveau_loaded is None


@pytest.mark.parametrize(
    ("fm", "smi", "install", "start"),
    [
        (FM_OK, "570.133.20", False, False),
        (["Fabric Manager version is : 570.133.20", "inactive"], "570.133.20", False, True),
        (["Fabric Manager version is : 550.90.07", "active"], "570.133.20", True, True),
        (FM_OK, "550.90.07", False, True),  # a new driver: the running one refuses it
        ([], "570.133.20", True, True),  # not installed, no unit
    ],
)
def test_fabric_manager_needs(fm: list[str], smi: str, install: bool, start: bool) -> None:
    d = driverstate.decide(driverstate.parse(reading(smi=[smi], fm=fm)), "570.133.20", "570.133.20")
    assert (d.fm_needs_install, d.fm_needs_start) == (install, start)
    plain = driverstate.decide(driverstate.parse(reading(smi=[smi], fm=fm)), "570.133.20")
    assert (plain.fm_needs_install, plain.fm_needs_start) == (False, False)  # not managed


def test_the_toolkit_and_nouveau() -> None:
    ctk = ["NVIDIA Container Toolkit CLI version 1.17.8", "commit: f202b80"]
    r = driverstate.parse(reading(ctk=ctk, modules=["nouveau"]))
    assert not driverstate.decide(r, "550.90.07", "", "1.17.8").ctk_needs_install
    assert driverstate.decide(r, "550.90.07", "", "1.17.9").ctk_needs_install
    assert driverstate.decide(r, "550.90.07").nouveau_loaded is True
    failed = driverstate.parse(reading(lsmod_rc=1))
    assert driverstate.decide(failed, "550.90.07").nouveau_loaded is None
    assert "lsmod could not be read on h1 (exited 1)" in driverstate.lsmod_message(failed, "h1")


def test_the_roles_filter_is_the_core() -> None:
    plugin = _plugin()
    text = reading(rc=18, fact=FACT, fm=FM_OK)
    got = plugin.nvidia_driver_state(text, "570.133.20", "570.133.20", "", "h1")
    decided = driverstate.decide(driverstate.parse(text), "570.133.20", "570.133.20")
    assert got == {**decided.to_dict(), "complete": True, "lsmod_message": ""}
    assert got["pending"] and not got["needs_install"] and got["fm_needs_start"]
    pre = plugin.nvidia_driver_prereqs(
        "@@release 6.8\n@@missing dkms\n@@end\n", "h1", ["/x/{release}"]
    )
    assert pre["searched"] == ["/x/6.8"] and pre["missing_tools"] == ["dkms"]
    assert pre["headers_message"].startswith(
        "prerequisite missing on h1: no headers for the running kernel 6.8 (looked in /x/6.8)"
    )
    assert pre["tools_message"].startswith("prerequisite missing on h1: dkms not found;")


# --- the script itself, run with sh on this machine --------------------------------------------
def _program(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def run_script(tmp: Path, *args: str) -> str:
    env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "HOME": str(tmp)}
    done = subprocess.run(
        ["sh", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_the_script_reads_what_the_role_decides_on(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    smi = _program(
        tmp_path / "bin",
        "nvidia-smi",
        'echo "$@" > "$HOME/smi-args"\nprintf "550.90.07\\n550.90.07 \\n"\n',
    )
    _program(tmp_path / "bin", "nv-fabricmanager", 'echo "Fabric Manager version is : 550.90.07"\n')
    _program(
        tmp_path / "bin",
        "systemctl",
        'echo "$1 $2" > "$HOME/systemctl-args"; echo inactive; exit 3\n',
    )
    _program(tmp_path / "bin", "nvidia-ctk", 'echo "NVIDIA Container Toolkit CLI version 1.17.8"\n')
    _program(tmp_path / "bin", "lsmod", 'printf "Module Size Used\\nnouveau 1 0\\n"\n')
    _program(tmp_path / "bin", "gcc", "")
    fact = tmp_path / "fact"
    fact.write_text(FACT)
    conf = tmp_path / "blacklist.conf"
    conf.write_bytes(b"\x00\xffbinary")
    conf.chmod(0o600)
    big = tmp_path / "big.conf"
    big.write_text("x" * (driverstate.CONTENT_LIMIT + 1))
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    release = os.uname().release
    headers = tmp_path / f"headers-{release}"
    headers.symlink_to(tmp_path / "nowhere")  # a dangling link counts, as stat's exists did
    out = run_script(
        tmp_path,
        f"smi={smi}",
        f"fact={fact}",
        f"fm={tmp_path / 'bin'}",
        "fm_unit=nvidia-fabricmanager",
        "ctk=1",
        "lsmod=1",
        f"dir={tmp_path}",
        f"blacklist={conf}",
        f"fact={fact}",
        "tool=gcc",
        "tool=gpuops-no-such-tool",
        f"headers={tmp_path}/headers-{{release}}",
        f"headers={tmp_path}/none-{{release}}",
    )
    r = driverstate.parse(out)
    assert r.complete and r.unknown_lines == 0, out
    assert (r.smi_rc, r.smi) == (0, ["550.90.07", "550.90.07 "])
    assert (
        tmp_path / "smi-args"
    ).read_text() == "--query-gpu=driver_version --format=csv,noheader\n"
    assert r.files["fact"].content == FACT.encode() and r.files["fact"].kind == "file"
    assert r.fm == ["Fabric Manager version is : 550.90.07", "inactive"]
    assert (tmp_path / "systemctl-args").read_text() == "is-active nvidia-fabricmanager\n"
    assert r.ctk == ["NVIDIA Container Toolkit CLI version 1.17.8"]
    assert (r.lsmod_rc, r.modules) == (0, ["Module", "nouveau"])
    assert r.files["dir"].kind == "directory"
    assert (r.files["blacklist"].mode, r.files["blacklist"].content) == (0o600, b"\x00\xffbinary")
    assert r.release == release and r.missing == ["gpuops-no-such-tool"]
    assert r.found == [str(headers)]
    d = driverstate.decide(r, "550.90.07", "550.90.07", "1.17.8")
    assert (d.needs_install, d.fm_needs_install, d.fm_needs_start, d.ctk_needs_install) == (
        False,
        False,
        True,  # inactive
        False,
    )
    assert d.nouveau_loaded is True and d.installed == "570.133.20"
    too_big = driverstate.parse(
        run_script(tmp_path, f"blacklist={big}", f"dir={tmp_path / 'link'}")
    )
    assert too_big.files["blacklist"].kind == "file" and too_big.files["blacklist"].content is None
    assert too_big.files["dir"].kind == "link"
    none = driverstate.parse(
        run_script(tmp_path, "smi=gpuops-no-smi", "lsmod=1", f"fact={tmp_path}/x")
    )
    assert none.smi_rc == 127 and none.files["fact"].kind == "absent"


# --- what the plan names and shows --------------------------------------------------------------
def plan_of(text: str, s: Settings, checks: dict[Check, str] | None = None) -> driverplan.HostPlan:
    found = driverplan.steps(driverstate.parse(text), s, "h1")
    every = {st.check: "" for st in found if st.check is not None}
    return driverplan.settle(found, {**every, **(checks or {})})


def L(task: str) -> str:
    return driverplan.label(task)


def test_a_driver_change_is_named_as_check_mode_names_it() -> None:
    text = reading(
        fm=["Fabric Manager version is : 550.90.07", "active"], extra=_files(CONF, 0o644)
    )
    p = plan_of(text, settings(fabricmanager="570.133.20", fabricmanager_sha256="b" * 64))
    assert p.changes == [
        L(driverplan.REPORT_INSTALL),
        L(driverplan.REBOOT),
        L(driverplan.FM_REPORT),
    ]
    assert p.diffs == [] and p.failed_task == ""
    assert plan_of(reading(smi=["570.133.20"], extra=_files(CONF, 0o644)), settings()).changes == []
    no_reboot = plan_of(text, settings(reboot=False, blacklist_nouveau=False))
    assert no_reboot.changes == [L(driverplan.REPORT_INSTALL)]
    pending = plan_of(reading(rc=18, fact=FACT, extra=_files(CONF, 0o644)), settings())
    assert pending.changes == [L(driverplan.REBOOT)]


def _files(content: str | None, mode: int, dir_mode: int = 0o755, uid: int = 0) -> list[str]:
    out = [f"@@file dir directory 0 0 {dir_mode:o} 4096"]
    if content is None:
        return [*out, "@@file blacklist absent"]
    out += [f"@@file blacklist file {uid} 0 {mode:o} {len(content)}", "@@content blacklist"]
    return [*out, "@@b64 blacklist " + base64.b64encode(content.encode()).decode()]


def test_the_blacklist_diffs_are_the_nodes_content_against_the_roles() -> None:
    at = {"smi": ["570.133.20"]}
    path = BLACKLIST.path
    absent = plan_of(
        reading(**at, extra=["@@file dir absent", "@@file blacklist absent"]), settings()
    )
    assert absent.changes == [L(driverplan.MODPROBE_DIR), L(driverplan.BLACKLIST)]
    assert absent.diffs == [
        {
            "task": L(driverplan.MODPROBE_DIR),
            "diff": {
                "before": {"path": "/etc/modprobe.d", "state": "absent"},
                "after": {"path": "/etc/modprobe.d", "state": "directory"},
            },
        },
        {
            "task": L(driverplan.BLACKLIST),
            "diff": [{"before": "", "after": CONF, "after_header": path}],
        },
    ]
    other = plan_of(reading(**at, extra=_files("blacklist nouveau\n", 0o600, 0o700)), settings())
    assert other.diffs == [
        {
            "task": L(driverplan.MODPROBE_DIR),
            "diff": {
                "before": {"path": "/etc/modprobe.d", "mode": "0700"},
                "after": {"path": "/etc/modprobe.d", "mode": "0755"},
            },
        },
        {
            "task": L(driverplan.BLACKLIST),
            "diff": [
                {
                    "before": "blacklist nouveau\n",
                    "after": CONF,
                    "before_header": path,
                    "after_header": path,
                }
            ],
        },
    ]
    owner = plan_of(reading(**at, extra=_files(CONF, 0o600, uid=1)), settings())
    assert owner.diffs == [
        {
            "task": L(driverplan.BLACKLIST),
            "diff": {
                "before": {"path": path, "owner": 1, "mode": "0600"},
                "after": {"path": path, "owner": 0, "mode": "0644"},
            },
        }
    ]
    unread = plan_of(
        reading(
            **at, extra=["@@file dir directory 0 0 755 1", "@@file blacklist file 0 0 644 9000"]
        ),
        settings(),
    )
    assert unread.changes == [L(driverplan.BLACKLIST)]
    assert (
        unread.diffs[0]["diff"] is None and "content was not read" in unread.diffs[0]["not_shown"]
    )
    assert (
        plan_of(reading(**at, extra=_files(CONF, 0o644)), settings(blacklist_nouveau=False)).changes
        == []
    )


def test_a_reading_cut_short_is_a_change_never_as_wanted() -> None:
    p = plan_of(reading(smi=["570.133.20"], extra=_files(CONF, 0o644), complete=False), settings())
    assert p.changes == [L(driverplan.READ_STATE)] and p.failed_task == ""
    assert "not read to its end" in p.diffs[0]["not_shown"]


def test_failures_stop_the_host_where_check_mode_stops_it() -> None:
    text = reading(modules=["nouveau"], extra=["@@missing dkms", *_files(None, 0)])
    s = settings()
    p = plan_of(text, s)
    assert p.failed_task == L(driverplan.TOOLS) and "dkms not found" in p.message
    assert p.changes == [
        L(driverplan.BLACKLIST),
        L(driverplan.NOUVEAU_REBOOT),
    ]
    check = Check(
        L(driverplan.CHECKSUM),
        "http://repo/NVIDIA-Linux-x86_64-570.133.20.run",
        "NVIDIA-Linux-x86_64-570.133.20.run",
        "a" * 64,
    )
    wrong = plan_of(text, s, {check: driverplan.checksum_message(check, "b" * 64)})
    assert (wrong.failed_task, wrong.changes) == (L(driverplan.CHECKSUM), [])
    assert wrong.message.startswith("sha256 of NVIDIA-Linux-x86_64-570.133.20.run is bbbb")
    unchecked = driverplan.settle(driverplan.steps(driverstate.parse(text), s, "h1"), {})
    assert unchecked.failed_task == L(driverplan.CHECKSUM)  # a check not made never passes
    lsmod = plan_of(reading(lsmod_rc=1, extra=_files(CONF, 0o644)), s)
    assert lsmod.failed_task == L(driverplan.LSMOD)


def test_the_toolkit_change_per_installer() -> None:
    text = reading(smi=["570.133.20"], ctk=[], extra=_files(CONF, 0o644))
    for installer, task in driverplan.CTK_INSTALL.items():
        p = plan_of(text, settings(container_toolkit="1.17.8", toolkit_installer=installer))
        assert p.changes == [L(task)]
        assert (p.diffs == []) == (installer == "command"), p.diffs


# --- the names and inputs the plan shares with the role -----------------------------------------
def _task_names() -> set[str]:
    names = set()
    for path in (ROLE / "tasks").glob("*.yml"):
        for task in yaml.safe_load(path.read_text()) or []:
            names.add(task.get("name"))
            names.update(t.get("name") for t in task.get("block", []))
    return names


def test_every_task_the_plan_names_is_a_task_of_the_role() -> None:
    assert set(driverplan.TASKS) <= _task_names()


def test_the_role_inputs_the_plan_reads_are_the_roles() -> None:
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    fixed = yaml.safe_load((ROLE / "vars/main.yml").read_text())
    assert set(ROLE_DEFAULTS_READ) <= set(defaults)
    assert not any("{{" in str(defaults[k]) for k in ROLE_DEFAULTS_READ)  # read, not templated
    nouveau = (ROLE / "tasks/nouveau.yml").read_text()
    for key in fixed:
        assert "{{ " + key + " }}" in nouveau, key
    state = (ROLE / "tasks/state.yml").read_text()
    for key in ("smi=", "fact=", "fm=", "fm_unit=", "ctk=1", "lsmod=1"):
        assert f"'{key}" in state, key
