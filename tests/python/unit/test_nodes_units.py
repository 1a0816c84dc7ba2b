"""Small units of ``gpuops nodes``: the ssh command line from inventory variables, the
ansible-runner event fold, JUnit XML, and the stable keys of the update result."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from gpuops.adapters import ansible, ssh
from gpuops.core import rollout
from gpuops.core.inventory import Host
from gpuops.errors import InvalidInput
from gpuops.render.junit import Case, junit_xml
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
    root = ET.fromstring(text)  # noqa: S314 - our own document
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
        "stopped",
        "refused",
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
    }
    assert doc["summary"] == {
        "changed": 1,
        "unchanged": 0,
        "failed": 0,
        "not-started": 1,
        "planned": 0,
    }
    assert "<testcase " in ro.junit()
