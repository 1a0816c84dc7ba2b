"""Small units of ``gpuops nodes``: the ssh command line from inventory variables, the
ansible-runner event fold, JUnit XML, and the stable keys of the update result."""

from __future__ import annotations

from pathlib import Path

import pytest
from junitcheck import assert_junit_well_formed

from gpuops import content
from gpuops.adapters import ansible, hostkeys, ssh
from gpuops.core import gpuhealth, rollout
from gpuops.core.inventory import Host
from gpuops.core.junit import Case, junit_xml
from gpuops.errors import GateRefused, HostBroken, InvalidInput, OperationFailed, Unreachable
from gpuops.usecases.nodes import inspect, update
from gpuops.usecases.nodes.records import HostRecord, Rollout


def test_ssh_follows_the_inventory_connection_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ansible.KEY_FILE_ENV, "/run/secrets/key")
    monkeypatch.setenv(ansible.USER_ENV, "jenkins-ops")
    host = Host(
        "gpu-01",
        ("gpu_h800", "gpu_nodes"),
        {
            "ansible_host": "192.0.2.21",
            "ansible_port": 2222,
            "ansible_ssh_common_args": "-o ProxyCommand='nc %h %p' -o KexAlgorithms=sntrup",
        },
    )
    argv = ssh.argv(host, "sh -s --")
    assert argv[-2:] == ["192.0.2.21", "sh -s --"]
    assert (
        argv[argv.index("-i") + 1] == "/run/secrets/key"
    )  # the step's key: the inventory sets none
    assert argv[argv.index("-l") + 1] == "jenkins-ops"
    assert argv[argv.index("-p") + 1] == "2222"
    assert "ProxyCommand=nc %h %p" in argv and "BatchMode=yes" in argv
    own = Host("gpu-02", (), {"ansible_user": "ops", "ansible_ssh_private_key_file": "/k"})
    own_argv = ssh.argv(own, "true")
    assert own_argv[own_argv.index("-l") + 1] == "ops" and "/k" in own_argv
    assert own_argv[-2] == "gpu-02"  # no ansible_host: the inventory name
    with pytest.raises(InvalidInput, match="ansible_ssh_common_args is not valid shell words"):
        ssh.argv(Host("x", (), {"ansible_ssh_common_args": "-o 'unclosed"}), "true")


def _event(kind: str, host: str, task: str, **res: object) -> dict[str, object]:
    return {
        "event": kind,
        "event_data": {
            "host": host,
            "task": task,
            "role": "nvidia_driver",
            "duration": 1.5,
            "res": res,
        },
    }


def test_runner_events_fold_into_per_host_results() -> None:
    seen: list[tuple[str, str, str]] = []
    fold = ansible._Events(lambda h, s, t, sec: seen.append((h, s, t)))
    fold(_event("runner_on_ok", "a", "Read the driver state", changed=False))
    fold(
        _event(
            "runner_on_ok",
            "a",
            "Install the driver",
            changed=True,
            diff={"before": "", "after": "x"},
        )
    )
    fold(
        _event(
            "runner_on_failed",
            "b",
            "Install the driver",
            msg="non-zero return code",
            stderr="ERROR: Unable to load the kernel module",
        )
    )
    fold(_event("runner_on_unreachable", "c", "Gathering", msg="Failed to connect: timed out"))
    fold({"event": "playbook_on_stats", "event_data": {}})
    a, b, c = fold.hosts["a"], fold.hosts["b"], fold.hosts["c"]
    assert (a.status, a.changed_tasks, a.ok) == (
        "changed",
        ["nvidia_driver : Install the driver"],
        2,
    )
    assert a.diffs == [
        {"task": "nvidia_driver : Install the driver", "diff": {"before": "", "after": "x"}}
    ]
    assert a.task_seconds == {
        "nvidia_driver : Read the driver state": 1.5,
        "nvidia_driver : Install the driver": 1.5,
    }
    assert (b.status, b.failed_task, b.message) == (
        "failed",
        "nvidia_driver : Install the driver",
        "non-zero return code: ERROR: Unable to load the kernel module",
    )
    assert c.status == "unreachable" and "timed out" in c.message
    assert [s for _, s, _ in seen] == ["changed", "failed", "unreachable"]


def test_junit_has_one_case_per_host_with_failures_and_skips() -> None:
    text = junit_xml(
        "suite",
        [
            Case("h1", "gpu-update.gpu_h800", 3.25),
            Case("h2", "gpu-update.gpu_h800", failure="failed: Install the driver <&>"),
            Case("h3", "gpu-update.gpu_a100", skipped="not started", output="batch 2"),
        ],
    )
    root = assert_junit_well_formed(text)
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["h2"].find("failure")
    assert failure is not None and failure.text == "failed: Install the driver <&>"
    assert cases["h3"].find("skipped") is not None and cases["h1"].get("time") == "3.250"


def test_update_result_keys_are_stable() -> None:
    ro = Rollout("inv", "gpu_h800", "test", ["nvidia_driver"], rollout.Policy(), False, None)
    ro.hosts["h1"] = HostRecord("h1", "gpu_h800", "h1", "570.133.20", 0, rollout.CHANGED)
    ro.hosts["h2"] = HostRecord("h2", "gpu_h800", None, "570.133.20", 1, rollout.NOT_STARTED)
    doc = ro.to_dict()
    assert set(doc) == {
        "inventory",
        "limit",
        "environment",
        "change",
        "policy",
        "check",
        "kubernetes",
        "summary",
        "changed",
        "failed",
        "not_started",
        "planned",
        "unchanged",
        "rolled_back",
        "rollback_failed",
        "rollback",
        "validation_level",
        "record",
        "downgrade",
        "stopped",
        "refused",
        "held",
        "resume",
        "resumed_from",
        "plan",
        "batches",
        "hosts",
        "diffs",
        "started_at",
        "finished_at",
        "timings_s",
        "artifacts",
    }
    assert set(doc["hosts"][0]) == {
        "host",
        "group",
        "node",
        "driver_wanted",
        "batch",
        "status",
        "reason",
        "planned_changes",
        "changed_tasks",
        "failed_task",
        "cordoned_before",
        "cordoned",
        "uncordoned",
        "waited_for",
        "evicted",
        "started_at",
        "finished_at",
        "phases_s",
        "slowest_tasks_s",
        "tainted",
        "driver_before",
        "cuda_before",
        "driver_after",
        "container_toolkit_before",
        "validation",
        "rollback",
    }
    assert doc["summary"] == {
        "changed": 1,
        "unchanged": 0,
        "failed": 0,
        "not-started": 1,
        "planned": 0,
        "rolled-back": 0,
        "rollback-failed": 0,
    }
    assert "<testcase " in ro.junit()
    assert_junit_well_formed(ro.junit())


def test_ssh_checks_host_keys_first_on_its_command_line() -> None:
    """ssh takes the first value of an option: gpuops' host-key options come before an
    inventory's ssh arguments, so ``StrictHostKeyChecking=no`` there changes nothing."""
    host = Host(
        "gpu-01",
        (),
        {"ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"},
    )
    argv = ssh.argv(host, "true", host_keys=hostkeys.HostKeys("/etc/gpuops/known hosts"))
    strict = argv.index("StrictHostKeyChecking=yes")
    assert strict < argv.index("StrictHostKeyChecking=no")
    assert argv.index('UserKnownHostsFile="/etc/gpuops/known hosts"') < argv.index(
        "UserKnownHostsFile=/dev/null"
    )
    assert "GlobalKnownHostsFile=none" in argv and "ControlPath=none" in argv
    default = ssh.argv(Host("gpu-02"), "true")  # no file: ssh's own, checked strictly
    assert "StrictHostKeyChecking=yes" in default
    assert not any(a.startswith("UserKnownHostsFile") for a in default)
    learn = hostkeys.HostKeys("/k", learned="/tmp/x/learned").options()
    assert "StrictHostKeyChecking=accept-new" in learn
    assert 'UserKnownHostsFile="/tmp/x/learned" "/k"' in learn  # new keys go to the first


def test_a_refused_host_key_names_the_host_and_the_file() -> None:
    keys = hostkeys.HostKeys("/srv/known_hosts")
    changed = (
        "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
        "Host key verification failed.\n"
    )
    said = keys.refusal("gpu-01", "192.0.2.1", changed)
    assert said is not None and said.startswith("host key of gpu-01 (192.0.2.1) differs")
    assert "/srv/known_hosts" in said
    unknown = "No ED25519 host key is known for 192.0.2.1 and you have requested strict checking.\n"
    said = keys.refusal("gpu-01", "192.0.2.1", unknown + "Host key verification failed.\n")
    assert said == (
        "host key of gpu-01 (192.0.2.1) is not in /srv/known_hosts: refused; to accept new "
        "keys: --learn-host-keys"
    )
    assert keys.refusal("gpu-01", "192.0.2.1", "ssh: connect to host: No route to host") is None
    result = ssh.Result("gpu-01", 255, "", "Host key verification failed.", 0.1, said)
    assert result.reason == said


def test_ansible_reads_the_sites_config_with_gpuops_settings_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site.cfg"
    site.write_text(
        "[defaults]\nhost_key_checking = False\nforks = 7\ncollections_path = cols\n"
        "[ssh_connection]\nssh_args = -o ControlMaster=auto -o ControlPersist=30s ; site\n"
    )
    monkeypatch.setenv("ANSIBLE_CONFIG", str(site))
    monkeypatch.delenv("ANSIBLE_SSH_ARGS", raising=False)
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH", raising=False)
    env = ansible.config_env(hostkeys.HostKeys("/srv/known_hosts"))
    assert env["ANSIBLE_CONFIG"] == str(site)  # the site's own file, not replaced
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"  # an environment variable wins over it
    assert env["ANSIBLE_SSH_ARGS"] == (
        "-o StrictHostKeyChecking=yes -o HashKnownHosts=no -o CheckHostIP=no "
        "-o 'UserKnownHostsFile=\"/srv/known_hosts\"' -o GlobalKnownHostsFile=none "
        "-o ControlMaster=auto -o ControlPersist=30s"
    )
    shipped = content.ansible_dir()
    assert env["ANSIBLE_COLLECTIONS_PATH"] == f"{shipped / 'collections'}:{tmp_path / 'cols'}"
    assert env["ANSIBLE_ROLES_PATH"] == str(shipped / "roles")
    # no ANSIBLE_CONFIG: ./ansible.cfg as Ansible finds it, else the shipped one
    monkeypatch.delenv("ANSIBLE_CONFIG")
    monkeypatch.chdir(tmp_path)
    assert ansible.config_env()["ANSIBLE_CONFIG"] == str(shipped / "ansible.cfg")
    (tmp_path / "ansible.cfg").write_text("[defaults]\nforks = 3\n")
    env = ansible.config_env()
    assert env["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert env["ANSIBLE_SSH_ARGS"].endswith(ansible.DEFAULT_SSH_ARGS)  # Ansible's own default
    (tmp_path / "ansible.cfg").write_text("no section header\n")
    with pytest.raises(InvalidInput, match="is not an INI file Ansible can read"):
        ansible.ansible_config()


def test_ansible_never_reuses_an_ssh_master_connection_checked_against_other_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ControlPersist keeps a master connection 60 s: a run under another known-hosts file (or
    after the file changed) must not ride on one whose host key was checked against other keys."""
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    first, second = tmp_path / "a_known_hosts", tmp_path / "b_known_hosts"
    first.write_text("10.0.0.1 ssh-ed25519 AAAA1\n")
    second.write_text("10.0.0.1 ssh-ed25519 AAAA1\n")

    def sockets(keys: hostkeys.HostKeys) -> str:
        return ansible.config_env(keys)["ANSIBLE_SSH_CONTROL_PATH_DIR"]

    a = sockets(hostkeys.HostKeys(str(first)))
    assert a == sockets(hostkeys.HostKeys(str(first)))  # the same policy shares its masters
    assert Path(a).parent == Path("~/.ansible/cp").expanduser()  # the shipped config's folder
    assert a != sockets(hostkeys.HostKeys(str(second)))
    assert a != sockets(hostkeys.HostKeys())
    assert a != sockets(hostkeys.HostKeys(str(first), learned=str(tmp_path / "learned")))
    first.write_text("10.0.0.1 ssh-ed25519 AAAA2\n")  # a key rotated in the same file
    assert a != sockets(hostkeys.HostKeys(str(first)))


def test_phase_timings_add_up_to_the_time_the_last_phase_ended() -> None:
    """CI stop 23: preflight 0.631 + plan 22.481 > the canary's start_s 23.111 (rounded apart)."""
    timings = update.phase_timings(100.0, preflight=100.6306, plan=123.1114)
    assert timings == {"preflight": 0.631, "plan": 22.48}
    canary_start_ms = round((123.1114 - 100.0) * 1000)  # as a batch's start_s is rounded
    assert round(timings["preflight"] * 1000) + round(timings["plan"] * 1000) <= canary_start_ms


def test_the_inspect_use_case_decides_its_verdict() -> None:
    """Critical findings are a refused gate (exit 3), hosts not inspected unreachable (exit 4):
    decided by the use case (the CLI only renders), words as the CLI said them before."""
    t = gpuhealth.Thresholds()
    down = gpuhealth.unreachable("h2", "unreachable: timed out", 8, t)
    bad = gpuhealth.unreachable("h1", "no GPU readings", 8, t)
    bad.status = gpuhealth.CRITICAL
    result = inspect.InspectResult(
        inspect.InspectRequest("inv"), "test", {"h1": "g", "h2": "g"}, [bad, down]
    )
    refused = inspect._verdict(result)
    assert isinstance(refused, GateRefused)
    assert refused.message == "critical findings on 1 host(s): h1"
    assert refused.hint == (
        "drain and repair them (see the findings); their Xid actions say what helps"
    )
    result.hosts = [down]
    lost = inspect._verdict(result)
    assert isinstance(lost, Unreachable)
    assert (lost.message, lost.hint) == (
        "1 host(s) could not be inspected: h2",
        "check their management network and ssh",
    )
    result.hosts = []
    assert inspect._verdict(result) is None
    assert "report" not in result.to_dict()  # only when a page was written beside the reports


def test_the_update_use_case_decides_its_verdict() -> None:
    ro = Rollout("inv", None, "test", ["nvidia_driver"], rollout.Policy(), False, None)
    ro.hosts["h1"] = HostRecord("h1", "g", None, status=rollout.FAILED)
    ro.hosts["h2"] = HostRecord("h2", "g", None, status=rollout.NOT_STARTED)
    ro.stopped = "1 host(s) failed, over the failure budget of 0"
    ro.artifacts = {"folder": "out"}
    failed = update._verdict(ro)
    assert isinstance(failed, OperationFailed)
    assert failed.message == (
        "1 host(s) failed: h1; 1 never started (1 host(s) failed, over the failure budget of 0)"
    )
    assert (
        failed.hint == "failed hosts stay cordoned; fix them and run again: it resumes "
        "(artifacts: out)"
    )
    ro.refused, ro.stopped = True, "headroom gate refused batch 1: why"
    refused = update._verdict(ro)
    assert isinstance(refused, GateRefused)
    assert refused.message == "rollout stopped: headroom gate refused batch 1: why"
    assert refused.hint == "free GPUs or lower --reserve, then run again: it resumes"


def test_rolled_back_and_broken_hosts_fail_the_run_and_are_named() -> None:
    ro = Rollout("inv", None, "test", ["nvidia_driver"], rollout.Policy(), False, None)
    ro.hosts["h1"] = HostRecord("h1", "g", "h1", "570.133.20", 0, rollout.ROLLED_BACK)
    ro.hosts["h1"].rollback = {
        "to": "550.90.07",
        "cuda": "12.4",
        "status": "rolled-back",
        "reason": "failed: Validate the GPUs: validation failed on h1: ...",
        "ident": "batch-00-rollback",
    }
    ro.hosts["h2"] = HostRecord("h2", "g", None, "570.133.20", 1, rollout.NOT_STARTED)
    ro.stopped = "1 host(s) failed, over the failure budget of 0"
    ro.artifacts = {"folder": "out"}
    failed = update._verdict(ro)
    assert isinstance(failed, OperationFailed)
    assert failed.message == (
        "1 rolled back: h1; 1 never started (1 host(s) failed, over the failure budget of 0)"
    )
    assert failed.hint == (
        "failed hosts stay cordoned; fix them and run again: it resumes (artifacts: out)"
    )
    ro.hosts["h1"].status = rollout.ROLLBACK_FAILED
    broken = update._verdict(ro)
    assert isinstance(broken, HostBroken) and broken.exit_code == 6
    assert broken.message.startswith("1 rollback(s) failed, left broken: h1; 1 never started")
    assert str(broken.hint).startswith("a host left broken stays cordoned and tainted")
    doc = ro.to_dict()
    assert (doc["rollback_failed"], doc["rolled_back"], doc["failed"]) == (["h1"], [], [])
    assert doc["summary"]["rollback-failed"] == 1
    suite = assert_junit_well_formed(ro.junit()).find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    ro.hosts["h1"].status = rollout.CHANGED
    assert update._verdict(ro) is None
