"""The release core: history records and what they mean, the lock's verdicts, the patch a
release sends, and early rollout failure detection."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gpuops.core import deploywatch as rollout
from gpuops.core import releasehistory as hist
from gpuops.core import releaselock as lock
from gpuops.core.deploywatch import (
    Condition,
    ContainerState,
    DeploymentState,
    Observation,
    PodState,
)
from gpuops.core.releaseconfig import ModelMount, RolloutPolicy
from gpuops.core.releasehistory import Release
from gpuops.core.releasepatch import Content, model_value, release_patch, split_image
from gpuops.errors import InvalidInput, OperationFailed


def rel(n: int, tag: str, status: str = hist.SUCCEEDED, **kw: object) -> Release:
    return Release(
        n,
        "prod",
        "promote",
        status,
        f"2025-01-0{n}T00:00:00Z",
        tag=tag,
        digest=f"sha256:{tag}",
        image=f"r/x:{tag}",
        **kw,
    )  # type: ignore[arg-type]


# -- history ------------------------------------------------------------------------------
def test_records_round_trip_and_damage_is_reported_not_reset() -> None:
    records = [rel(2, "b"), rel(1, "a", model="m1")]
    assert hist.decode(hist.encode(records), "cm") == sorted(records, key=lambda r: r.number)
    for text, why in [
        ("{", "not valid JSON"),
        ("{}", "must be a JSON list"),
        ('[{"number": 1}]', "lacks"),
        (
            '[{"number": 1, "environment": "p", '
            '"action": "promote", "status": "weird", "started": "t"}]',
            "bad number or status",
        ),
    ]:
        with pytest.raises(OperationFailed, match=why):
            hist.decode(text, "ConfigMap ai/h")


_GOOD = {"number": 1, "environment": "p", "action": "promote", "status": "succeeded"}


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({**_GOOD, "tag": ["1.0", "1.1"]}, 'field \'tag\' must be a string, not ["1.0","1.1"]'),
        ({**_GOOD, "number": True}, "field 'number' must be a release number"),
        ({**_GOOD, "number": "3"}, "field 'number' must be a release number"),
        ({**_GOOD, "number": 0}, "field 'number' must be a release number"),
        ({**_GOOD, "number": 1.5}, "field 'number' must be a release number"),
        ({**_GOOD, "previous": True}, "field 'previous' must be a release number"),
        ({**_GOOD, "rolled_back_by": "2"}, "field 'rolled_back_by' must be a release number"),
        ({**_GOOD, "digest": {"sha256": "x"}}, "field 'digest' must be a string"),
        ({**_GOOD, "environment": 7}, "field 'environment' must be a string"),
        ({**_GOOD, "status": ["succeeded"]}, "field 'status' must be a string"),
        ({**_GOOD, "action": "deploy"}, "unknown action 'deploy'"),
        ({**_GOOD, "failure": "it broke"}, "field 'failure' must be an object"),
        ({**_GOOD, "failure": {"message": "no kind"}}, "field 'failure' must be an object"),
        ({**_GOOD, "started": None}, "lacks started"),
        ("a string", "is a JSON string, not an object"),
    ],
)
def test_history_records_are_decoded_strictly_naming_the_object(record: object, says: str) -> None:
    """A record of the wrong shape in the cluster is an operation failure naming the object
    and the field (exit 1), never a crash later on (a list as a tag was unhashable: exit 5)
    nor a value silently taken for another (``true`` as release number 1)."""
    good = {**_GOOD, "number": 2, "tag": "1.0", "started": "t"}
    text = json.dumps([good, {"started": "t", **record} if isinstance(record, dict) else record])
    with pytest.raises(OperationFailed) as caught:
        hist.decode(text, "ConfigMap ai/gpuops-releases-prod")
    message = caught.value.message
    assert message.startswith("ConfigMap ai/gpuops-releases-prod: release record 1 "), message
    assert says in message, message


def test_a_history_that_repeats_a_number_or_nests_without_end_is_damaged() -> None:
    twice = json.dumps([{**_GOOD, "started": "t"}, {**_GOOD, "started": "u"}])
    with pytest.raises(OperationFailed, match="release record 1 repeats release number 1"):
        hist.decode(twice, "ConfigMap ai/h")
    with pytest.raises(OperationFailed, match="ConfigMap ai/h: the release history is nested"):
        hist.decode("[" * 100_000 + "]" * 100_000, "ConfigMap ai/h")


def test_previous_skips_failed_rolled_back_and_identical_releases() -> None:
    records = [
        rel(1, "1.0"),
        rel(2, "1.1"),
        rel(3, "1.2", hist.FAILED, rolled_back_to=2),
        rel(4, "1.3", rolled_back_by=5),
        Release(
            5, "prod", "rollback", hist.SUCCEEDED, "t", tag="1.1", digest="sha256:1.1", previous=4
        ),
    ]
    current = records[-1]
    assert hist.previous(records, current) == records[0], "1.3 was rolled back, 1.1 is what runs"
    assert [r.tag for r in hist.rollback_choices(records, current)] == ["1.0"]
    assert hist.previous(records, records[1]) == records[0]
    assert hist.previous(records[:1], records[0]) is None
    assert hist.find_tag(records, "1.0", current) == records[0]
    with pytest.raises(InvalidInput, match="is what the environment runs now"):
        hist.find_tag(records, "1.1", current)
    with pytest.raises(InvalidInput, match=r"no successful release of tag '1.2'.*") as info:
        hist.find_tag(records, "1.2", current)
    assert "1.0" in (info.value.hint or "")


def test_reconcile_finishes_open_records_from_what_the_cluster_says() -> None:
    open_ = [rel(1, "a", hist.PENDING), rel(2, "b", hist.PENDING), rel(3, "c", hist.PENDING)]
    got = {f.record.number: f.record for f in hist.reconcile(open_, 2, 3, True, "now")}
    assert got[1].status == hist.ABORTED and "never reached" in (got[1].note or "")
    assert got[2].status == hist.SUCCEEDED and got[2].finished == "now"
    assert got[3].status == hist.FAILED and got[3].rolled_back_to == 2
    not_done = hist.reconcile([rel(4, "d", hist.PENDING)], 4, None, False, "now")
    assert not_done[0].record.status == hist.INTERRUPTED
    assert hist.reconcile([rel(1, "a")], 1, None, True, "now") == []


def test_trim_keeps_the_newest_and_never_the_current_or_open_ones() -> None:
    records = [rel(i, str(i)) for i in range(1, 8)]
    records[1] = rel(2, "2", hist.PENDING)
    kept = [r.number for r in hist.trim(records, 3, current=1)]
    assert kept == [1, 2, 5, 6, 7]
    assert hist.next_number(records) == 8 and hist.next_number([]) == 1


# -- lock ---------------------------------------------------------------------------------
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def test_lock_verdicts() -> None:
    body = lock.lease_body(
        "l", "ns", "ci-1", "promote 1.2 to prod", 60, NOW - timedelta(seconds=30)
    )
    holder = lock.holder_of(body)
    assert holder is not None and holder.operation == "promote 1.2 to prod"
    assert lock.decide(None, "me", NOW) == lock.FREE
    assert lock.decide(holder, "ci-1", NOW) == lock.MINE
    assert lock.decide(holder, "me", NOW) == lock.HELD
    assert lock.decide(holder, "me", NOW + timedelta(seconds=31)) == lock.STALE
    assert holder.describe() == "ci-1 (promote 1.2 to prod), since 2025-06-01 11:59:30 UTC"
    assert lock.holder_of({"spec": {"holderIdentity": ""}}) is None
    assert lock.lease_name("infer") == "gpuops-release-lock.infer"
    assert len(lock.lease_name("x" * 253)) == 253


# -- patch --------------------------------------------------------------------------------
def test_the_patch_changes_only_the_image_and_the_model_and_never_the_template_for_ids() -> None:
    env_mount = ModelMount("env", "MODEL_VERSION")
    old, new = Content("r/x:1@sha256:a", "m1"), Content("r/x:2@sha256:b", "m2")
    patch = release_patch("infer", env_mount, old, new, release=7, change_cause="why")
    assert patch["spec"]["template"] == {
        "spec": {
            "containers": [
                {
                    "name": "infer",
                    "image": "r/x:2@sha256:b",
                    "env": [{"name": "MODEL_VERSION", "value": "m2"}],
                }
            ]
        }
    }
    assert patch["metadata"]["annotations"] == {
        hist.RELEASE_ANNOTATION: "7",
        hist.CHANGE_CAUSE: "why",
        hist.ROLLED_BACK_ANNOTATION: None,
    }
    back = release_patch(
        "infer",
        env_mount,
        new,
        Content(old.image, None),
        release=None,
        change_cause="restore",
        rolled_back=7,
    )
    assert back["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "MODEL_VERSION", "$patch": "delete"}
    ]
    assert back["metadata"]["annotations"][hist.RELEASE_ANNOTATION] is None
    cm = release_patch(
        "c",
        ModelMount("configmap", "m", "v"),
        old,
        Content(old.image, "m3"),
        release=1,
        change_cause="x",
    )
    assert cm["spec"]["template"] == {
        "metadata": {"annotations": {"gpuops.io/model-version": "m3"}}
    }
    deployment = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "c", "env": [{"name": "MODEL_VERSION", "value": "m1"}]}]
                }
            }
        }
    }
    assert model_value(deployment, "c", env_mount) == "m1"
    assert split_image("127.0.0.1:5000/ai/x:1.2@sha256:ab") == (
        "127.0.0.1:5000/ai/x",
        "1.2",
        "sha256:ab",
    )
    assert split_image("127.0.0.1:5000/ai/x") == ("127.0.0.1:5000/ai/x", None, None)


# -- rollout ------------------------------------------------------------------------------
POLICY = RolloutPolicy(timeout_s=300, unschedulable_s=10, image_pull_s=5, ready_s=20, restarts=3)


def dep(**kw: object) -> DeploymentState:
    base: dict[str, object] = {
        "name": "infer",
        "generation": 2,
        "observed_generation": 2,
        "replicas": 2,
        "current": 3,
        "updated": 1,
        "ready": 2,
        "available": 2,
    }
    return DeploymentState(**{**base, **kw})  # type: ignore[arg-type]


def pod(name: str = "p1", **kw: object) -> PodState:
    return PodState(name=name, **kw)  # type: ignore[arg-type]


def assess(obs: Observation, t: rollout.Tracker, at: float) -> rollout.Verdict:
    return rollout.assess(obs, t, at, POLICY)


def test_unschedulable_fails_after_its_grace_while_nothing_progresses() -> None:
    t = rollout.Tracker(started=0.0)
    stuck = Observation(
        dep(), (pod(unschedulable="0/6 nodes are available: 6 Insufficient nvidia.com/gpu."),)
    )
    v = assess(stuck, t, 1.0)
    assert v.state == rollout.PROGRESSING and "1 pod(s) to be scheduled (0/6 nodes" in v.line
    assert assess(stuck, t, 10.9).state == rollout.PROGRESSING
    v = assess(stuck, t, 11.0)
    assert v.state == rollout.FAILED and v.problem is not None
    assert v.problem.kind == "unschedulable" and v.problem.pods == ("p1",)
    assert v.problem.scheduler_message.startswith("0/6 nodes are available")


def test_progress_resets_the_unschedulable_clock() -> None:
    t = rollout.Tracker(started=0.0)
    stuck = (pod("a", unschedulable="Insufficient"),)
    assess(Observation(dep(), stuck), t, 0.0)
    assess(Observation(dep(ready=1), stuck), t, 8.0)  # an old pod went away: progress
    assert assess(Observation(dep(ready=1), stuck), t, 12.0).state == rollout.PROGRESSING
    assert assess(Observation(dep(ready=1), stuck), t, 18.0).state == rollout.FAILED


@pytest.mark.parametrize(
    ("container", "after", "kind"),
    [
        (
            ContainerState("c", waiting="ImagePullBackOff", waiting_message="Back-off"),
            0.0,
            "image-pull",
        ),
        (ContainerState("c", waiting="InvalidImageName"), 0.0, "image-pull"),
        (ContainerState("c", waiting="ErrImagePull"), 5.0, "image-pull"),
        (
            ContainerState("c", waiting="CrashLoopBackOff", restarts=1, last_exit_code=1),
            0.0,
            "crash-loop",
        ),
        (ContainerState("c", running=True, restarts=3), 0.0, "crash-loop"),
        (ContainerState("c", waiting="CreateContainerConfigError"), 5.0, "cannot-start"),
        (ContainerState("c", running=True), 20.0, "not-ready"),
    ],
)
def test_container_troubles(container: ContainerState, after: float, kind: str) -> None:
    t = rollout.Tracker(started=0.0)
    obs = Observation(dep(), (pod(node="n1", phase="Running", containers=(container,)),))
    if after:
        assert assess(obs, t, 0.0).state == rollout.PROGRESSING
    v = assess(obs, t, after)
    assert v.state == rollout.FAILED and v.problem is not None and v.problem.kind == kind


def test_after_an_api_outage_the_problem_clocks_start_again() -> None:
    """A pod seen running but not Ready just before the API server went away is not called
    never-Ready for the outage: its kubelet could not report either."""
    t = rollout.Tracker(started=0.0)
    running = ContainerState("c", running=True)
    obs = Observation(dep(), (pod(node="n1", phase="Running", containers=(running,)),))
    assert assess(obs, t, 0.0).state == rollout.PROGRESSING
    t.resume(19.0)  # the API answered again at 19 s
    assert assess(obs, t, 20.0).state == rollout.PROGRESSING  # 1 s, not 20 s
    v = assess(obs, t, 20.0 + POLICY.ready_s)  # ready_s after it was seen again
    assert v.state == rollout.FAILED and v.problem is not None and v.problem.kind == "not-ready"


def test_the_deployments_own_verdicts_and_our_timeout() -> None:
    t = rollout.Tracker(started=0.0)
    deadline = dep(
        conditions={
            "Progressing": Condition(
                "False", "ProgressDeadlineExceeded", 'ReplicaSet "x" has timed out progressing.'
            )
        }
    )
    v = assess(Observation(deadline), t, 1.0)
    assert v.problem is not None and v.problem.kind == "progress-deadline"
    assert "timed out progressing" in v.problem.message
    quota = dep(conditions={"ReplicaFailure": Condition("True", "FailedCreate", "exceeded quota")})
    assert (
        assess(Observation(quota), rollout.Tracker(started=0.0), 0.0).state == rollout.PROGRESSING
    )
    t2 = rollout.Tracker(started=0.0)
    assess(Observation(quota), t2, 0.0)
    assert assess(Observation(quota), t2, 10.0).problem.kind == "replica-failure"  # type: ignore[union-attr]
    assert assess(Observation(dep()), rollout.Tracker(started=0.0), 301.0).problem.kind == "timeout"  # type: ignore[union-attr]


def test_complete_is_what_kubectl_rollout_status_calls_complete() -> None:
    done = dep(updated=2, current=2, ready=2, available=2)
    v = assess(Observation(done), rollout.Tracker(started=0.0), 1.0)
    assert v.state == rollout.COMPLETE and v.line.endswith("rollout complete")
    for not_yet in (
        dep(updated=2, current=3, ready=2, available=2),  # an old pod is left
        dep(updated=2, current=2, ready=2, available=1),  # not available yet
        dep(updated=2, current=2, ready=2, available=2, observed_generation=1),
    ):
        assert (
            assess(Observation(not_yet), rollout.Tracker(started=0.0), 1.0).state
            == rollout.PROGRESSING
        )
    line = rollout.progress_line(Observation(dep(updated=2, current=3, available=1)))
    assert "1 old pod(s) to terminate" in line
