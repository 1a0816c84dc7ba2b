"""The node change history's records (:mod:`gpuops.core.nodehistory`): encode/decode, the
version, malformed documents (an error, never an empty history), trim, record ids, the
state a record left and the pins ``nodes rollback`` builds from it; and the record the hook
makes from a rollout (:func:`gpuops.usecases.nodes.history.new_record`)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters import gitrev
from gpuops.adapters.kube import Conflict, NotFound
from gpuops.core import nodehistory as nh
from gpuops.core import rollout
from gpuops.core.inventory import Host, Inventory
from gpuops.core.nodestate import DriverPin
from gpuops.errors import InvalidInput, OperationFailed
from gpuops.fsio import OutDir
from gpuops.render.html import nodehistory as nodehistory_page
from gpuops.render.nodehistory import history_text
from gpuops.usecases.nodes import history, historystore
from gpuops.usecases.nodes.records import HostRecord, Rollout

SHA = {"550.90.07": "a" * 64, "570.133.20": "b" * 64}
WHERE = "ConfigMap default/gpuops-node-history-test"


def host(
    state: str, before: str | None, after: str | None, group: str = "gpu_h800"
) -> nh.HostOutcome:
    return nh.HostOutcome(state, group, driver_before=before, driver_after=after, cuda_after="12.8")


def rec(number: int, **hosts: nh.HostOutcome) -> nh.NodeRecord:
    outcomes = {k.replace("_", "-"): v for k, v in hosts.items()}
    return nh.NodeRecord(
        number,
        "test",
        "update",
        nh.SUCCEEDED,
        "2026-12-01T10:00:00Z",
        hosts=outcomes,
        groups=nh.group_drivers(outcomes),
    )


def inventory(*names: str) -> Inventory:
    hosts = tuple(
        Host(
            n,
            ("gpu_h800", "gpu_nodes"),
            {
                "gpuops_environment": "test",
                "gpu_nodes_driver_sha256": SHA,
                "gpu_nodes_driver_version": "570.133.20",
                "gpu_nodes_cuda_version": "12.8",
            },
        )
        for n in names
    )
    return Inventory("/inv/hosts.yml", hosts)


def test_records_round_trip_with_their_version() -> None:
    records = [
        rec(1, h1=host("changed", "550.90.07", "570.133.20")),
        rec(2, h1=host("unchanged", "570.133.20", "570.133.20")),
    ]
    text = nh.encode(records)
    assert json.loads(text)["version"] == nh.VERSION
    back = nh.decode(text, WHERE)
    assert back == records
    assert back[0].id == "test-1"
    assert back[0].groups == {"gpu_h800": nh.GroupDrivers({"550.90.07": 1}, {"570.133.20": 1})}


def test_no_configmap_key_is_an_empty_history_but_an_empty_text_is_damaged() -> None:
    assert nh.decode(None, WHERE) == []
    with pytest.raises(OperationFailed, match="not valid JSON"):
        nh.decode("", WHERE)


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"records": []}', "has no version"),
        ('{"version": 2, "records": []}', "version 2; this gpuops reads version 1"),
        ('{"version": true, "records": []}', "version true"),
        ('{"version": 1, "records": {}}', "'records' must be a JSON list"),
        ('{"version": 1, "records": [3]}', "node record 0: is a JSON integer"),
        ('{"version": 1, "records": [{"number": 1}]}', "lacks 'status'"),
        (
            '{"version":1,"records":[{"number":1,"fleet":"t","action":"update","status":"odd",'
            '"started":"x"}]}',
            "unknown status",
        ),
        (
            '{"version":1,"records":[{"number":"1","fleet":"t","action":"update",'
            '"status":"failed","started":"x"}]}',
            "field 'number' is a JSON string",
        ),
        (
            '{"version":1,"records":[{"number":1,"fleet":"t","action":"update",'
            '"status":"failed","started":"x","hosts":{"h":{"status":"changed"}}}]}',
            "host 'h': lacks 'group'",
        ),
        (
            '{"version":1,"records":[{"number":1,"fleet":"t","action":"update",'
            '"status":"failed","started":"x","groups":{"g":{"before":{"550":"1"}}}}]}',
            "driver version -> host count",
        ),
    ],
)
def test_a_damaged_history_is_an_error_naming_the_configmap(doc: str, says: str) -> None:
    with pytest.raises(OperationFailed) as err:
        nh.decode(doc, WHERE)
    assert WHERE in err.value.message and says in err.value.message
    assert "does not overwrite it" in (err.value.hint or "")


def test_a_number_twice_is_damaged() -> None:
    text = nh.encode([rec(1), rec(1)])
    with pytest.raises(OperationFailed, match="number 1 appears twice"):
        nh.decode(text, WHERE)


def test_trim_keeps_the_newest() -> None:
    records = [rec(n) for n in (3, 1, 2, 5, 4)]
    assert [r.number for r in nh.trim(records, 3)] == [3, 4, 5]
    assert [r.number for r in nh.trim(records, 10)] == [1, 2, 3, 4, 5]
    assert nh.next_number(records) == 6 and nh.next_number([]) == 1


@pytest.mark.parametrize(("value", "n"), [("7", 7), ("test-7", 7), (" 12 ", 12)])
def test_record_ids(value: str, n: int) -> None:
    assert nh.parse_id(value, "test") == n


@pytest.mark.parametrize("value", ["prod-7", "x", "-7", "7a", "", "test-"])
def test_bad_record_ids_are_input_errors(value: str) -> None:
    with pytest.raises(InvalidInput):
        nh.parse_id(value, "test")


def test_the_state_a_record_left_takes_hosts_it_did_not_touch_from_earlier_ones() -> None:
    records = [
        rec(1, h1=host("changed", "535.1", "550.90.07"), h2=host("changed", "535.1", "550.90.07")),
        rec(2, h1=host("changed", "550.90.07", "570.133.20")),  # --limit h1
        rec(3, h1=host("failed", "570.133.20", None), h2=host("changed", "550.90.07", "570.1")),
    ]
    after2 = nh.state_after(records, 2)
    assert {k: (v.driver, v.number) for k, v in after2.items()} == {
        "h1": ("570.133.20", 2),
        "h2": ("550.90.07", 1),
    }
    after3 = nh.state_after(records, 3)  # h1 failed in 3: its driver after 3 is not known
    assert after3["h1"] == nh.HostState(None, "", 3) and after3["h2"].driver == "570.1"
    before2 = nh.state_before(records, 2)
    assert {k: v.driver for k, v in before2.items()} == {"h1": "550.90.07", "h2": "550.90.07"}
    with pytest.raises(InvalidInput, match="no node record 9"):
        nh.state_after(records, 9)


def test_the_pins_of_a_rollback() -> None:
    records = [
        rec(1, gpu_h800_01=host("changed", "535.1", "550.90.07")),
        rec(2, gpu_h800_01=host("changed", "550.90.07", "570.133.20")),
    ]
    inv = inventory("gpu-h800-01")
    assert history.pins_for(records, "test", inv, "test-1") == {
        "gpu-h800-01": DriverPin("550.90.07", "12.8")
    }
    assert history.pins_for(records, "test", inv, "2", before=True) == {
        "gpu-h800-01": DriverPin("550.90.07", "")
    }
    with pytest.raises(InvalidInput, match="gpu-h800-02 ran when record test-2"):
        history.pins_for(records, "test", inventory("gpu-h800-01", "gpu-h800-02"), "2")
    with pytest.raises(InvalidInput, match=r"no sha256 for driver 535\.1"):
        history.pins_for(records, "test", inv, "1", before=True)


def test_the_record_of_a_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILD_USER_ID", "alice")
    monkeypatch.setenv("BUILD_URL", "https://bob:secret@ci.example/job/n/3/")
    ro = Rollout(
        "/inv/hosts.yml", "gpu_h800", "test", ["nvidia_driver"], rollout.Policy(), False, None
    )
    ro.hosts = {
        "a": HostRecord(
            "a",
            "gpu_h800",
            "a",
            "570.133.20",
            status=rollout.CHANGED,
            driver_before="550.90.07",
            cuda_before="12.4",
        ),
        "b": HostRecord(
            "b",
            "gpu_h800",
            "b",
            "570.133.20",
            status=rollout.ROLLED_BACK,
            driver_before="550.90.07",
            cuda_before="12.4",
            driver_after="550.90.07",
        ),
        "c": HostRecord(
            "c",
            "gpu_h800",
            "c",
            "570.133.20",
            status=rollout.FAILED,
            driver_before="550.90.07",
            cuda_before="12.4",
        ),
    }
    r = historystore.new_record(4, inventory("a", "b", "c"), ro, revision="f" * 40)
    assert (r.who, r.who_from, r.link) == ("alice", "jenkins", "https://ci.example/job/n/3/")
    assert r.status == nh.FAILED and r.action == "update" and r.inventory_revision == "f" * 40
    assert (r.hosts["a"].driver_after, r.hosts["a"].cuda_after) == ("570.133.20", "12.8")
    assert r.hosts["b"].rolled_back and r.hosts["b"].cuda_after == "12.4"
    assert r.hosts["c"].driver_after is None  # a failed host's driver is not known
    assert r.groups["gpu_h800"] == nh.GroupDrivers(
        {"550.90.07": 3}, {"570.133.20": 1, "550.90.07": 1, "unknown": 1}
    )
    pinned = historystore.new_record(
        5, inventory("a"), ro, pins={"a": DriverPin("550.90.07", "12.4")}, rollback_of=(2, True)
    )
    assert pinned.action == "rollback" and pinned.rollback_of == 2 and pinned.rollback_before
    assert nh.decode(nh.encode([pinned]), WHERE) == [pinned]


def test_the_fleet_must_be_one_valid_name() -> None:
    two = Inventory(
        "/i",
        (Host("a", (), {"gpuops_environment": "x"}), Host("b", (), {"gpuops_environment": "y"})),
    )
    with pytest.raises(InvalidInput, match="several fleets"):
        historystore.fleet_of(two)
    bad = Inventory("/i", (Host("a", (), {"gpuops_environment": "Prod_1"}),))
    with pytest.raises(InvalidInput, match="not a valid name"):
        historystore.fleet_of(bad)
    ns = Inventory("/i", (Host("a", (), {"gpuops_history_namespace": "ops"}),))
    assert historystore.namespace_of(ns) == "ops"
    assert historystore.namespace_of(inventory("a")) == historystore.DEFAULT_NAMESPACE


def test_the_revision_is_none_outside_a_git_work_tree(tmp_path: Path) -> None:
    assert gitrev.revision(tmp_path) is None
    assert gitrev.revision(tmp_path / "absent") is None
    here = gitrev.revision(Path(__file__).parent)
    assert here is None or len(here) in (40, 64)


def history_doc() -> dict[str, Any]:
    """A ``gpuops nodes history`` result as the use case makes it (also the report inputs'
    seed)."""
    records = [
        rec(2, gpu_h800_01=host("rolled-back", "550.90.07", "550.90.07")),
        rec(1, gpu_h800_01=host("changed", "535.1", "550.90.07")),
    ]
    records[0].link = "https://ci.example/job/n/2/"
    records[0].action, records[0].rollback_of = "rollback", 1
    out = history.NodeHistory(
        "test", "default", "gpuops-node-history-test", "https://k", 2, records
    )
    return dict(out.to_dict())


def test_the_history_page(tmp_path: Path) -> None:
    doc = history_doc()
    ctx = nodehistory_page.context(doc)
    assert (ctx["verdict"], ctx["verdict_class"]) == ("last change succeeded", "ok")
    row = ctx["rows"][0]
    assert row["id"] == "test-2" and row["action"] == "rollback to 1"
    assert row["link"] == "https://ci.example/job/n/2/"
    assert row["groups"] == [{"group": "gpu_h800", "before": "550.90.07", "after": "550.90.07"}]
    assert row["hosts"][0]["status_class"] == "warn"
    written = nodehistory_page.write(doc, OutDir(tmp_path, option="out"))
    html = written.page.read_text()
    assert 'data-key="record">test-2<' in html and "gpu-h800-01" in html
    empty = nodehistory_page.context({**doc, "records": []})
    assert empty["verdict"] == "no node change yet"


def test_the_history_text() -> None:
    text = history_text(history_doc())
    assert "node history of fleet test (ConfigMap default/gpuops-node-history-test" in text
    assert " test-2 " in text and "gpu_h800: 535.1 -> 550.90.07" in text


@pytest.mark.parametrize("args", [[], ["--to", "1", "--before", "1"], ["--to", "x;y"]])
def test_rollback_needs_exactly_one_valid_record(args: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "KUBECONFIG"))}
    env["KUBECONFIG"] = str(tmp_path / "no-such-kubeconfig")
    env["GPUOPS_ERROR_FILE"] = str(tmp_path / "error.json")
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        h1: {}\n")
    gpuops = str(Path(sys.executable).parent / "gpuops")
    done = subprocess.run(
        [gpuops, "nodes", "rollback", "-i", str(inv), *args],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    error = json.loads((tmp_path / "error.json").read_text())["error"]
    assert ("one of --to and --before" if len(args) != 2 else "not a node record id") in (
        error["message"]
    )


def test_rollback_to_a_record_that_left_a_host_unknown_is_refused() -> None:
    records = [
        rec(1, gpu_h800_01=host("changed", "535.1", "550.90.07")),
        rec(2, gpu_h800_01=host("failed", "550.90.07", None)),  # not rolled back: unknown
    ]
    inv = inventory("gpu-h800-01")
    with pytest.raises(InvalidInput) as err:
        history.pins_for(records, "test", inv, "2")
    assert "gpu-h800-01 (record test-2)" in err.value.message
    assert "--limit it out" in (err.value.hint or "")
    # record 1 knew it: --to 1 still works
    assert history.pins_for(records, "test", inv, "1") == {
        "gpu-h800-01": DriverPin("550.90.07", "12.8")
    }


# -- the size of the history ---------------------------------------------------------------


def fleet_record(number: int, hosts: int = 200, reason: str = "") -> nh.NodeRecord:
    """A record of a ``hosts``-host fleet upgrade (names and drivers as a real fleet's)."""
    outcomes = {
        f"gpu-h800-{i:03d}.dc1.example.com": nh.HostOutcome(
            "changed",
            "gpu_h800",
            node=f"gpu-h800-{i:03d}.dc1.example.com",
            driver_before="550.90.07",
            cuda_before="12.4",
            driver_after="570.133.20",
            cuda_after="12.8",
            reason=reason,
        )
        for i in range(hosts)
    }
    r = rec(number)
    r.hosts, r.groups = outcomes, nh.group_drivers(outcomes)
    r.inventory, r.who, r.link = "/srv/inventory/production", "alice", "https://ci/j/1/"
    return r


def test_a_200_host_fleet_history_stays_under_the_configmap_limit() -> None:
    reason = "validation failed on the host: dcgmi diag -r 1 (DCGM 4.1.1): " + "x" * 400
    records = [fleet_record(n, reason=reason) for n in range(1, 101)]
    assert nh.size(records) > 1024 * 1024  # what count-only trimming wrote
    kept = nh.trim(records)
    assert nh.size(kept) <= nh.MAX_BYTES
    assert kept[-1] == records[-1]  # the newest is whole; the oldest went first
    assert [r.number for r in kept] == list(range(101 - len(kept), 101))
    assert nh.decode(nh.encode(kept), WHERE) == kept


def test_a_record_too_large_on_its_own_is_compacted_never_refused() -> None:
    big = fleet_record(7, hosts=3000, reason="r" * 500)
    for i, h in enumerate(big.hosts.values()):
        if i % 2:
            h.driver_after = h.driver_before  # half the fleet had nothing to change
    big.groups = nh.group_drivers(big.hosts)
    kept = nh.trim([fleet_record(6), big])
    assert kept[-1].number == 7 and nh.size(kept) <= nh.MAX_BYTES
    out = kept[-1]
    assert out.groups == big.groups  # every host still counted per group
    assert all(len(h.reason) <= nh.REASON_COMPACT for h in out.hosts.values())
    assert out.hosts_omitted == {"changed": 1500}  # the unchanged ones summarised
    assert all(h.driver_after == "570.133.20" for h in out.hosts.values())
    huge = nh.trim([fleet_record(8, hosts=10000)])[0]  # even the changed hosts do not fit
    assert huge.hosts == {} and huge.hosts_omitted == {"changed": 10000}
    assert nh.size([huge]) <= nh.MAX_BYTES
    with pytest.raises(InvalidInput, match="does not know"):  # no host's state after it
        history.pins_for(
            [fleet_record(1, hosts=1), huge], "test", inventory("gpu-h800-000.dc1.example.com"), "8"
        )


# -- the ConfigMap's conditional writes ------------------------------------------------------


class FakeConfigMaps:
    """ConfigMaps of one in-memory API server, as the real one answers: POST of an existing
    name 409 AlreadyExists, PUT with a stale resourceVersion 409, PUT of a deleted one 404, an
    object over 1 MiB refused. ``before_write`` runs before each POST/PUT (another writer).
    Test data in the API's shapes, not the lab."""

    server = "https://fake"

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 10
        self.writes: list[str] = []
        self.before_write: list[Any] = []

    def put(self, name: str, data: dict[str, str]) -> None:
        """Another writer's change (a new resourceVersion)."""
        self.rv += 1
        meta = {"name": name, "namespace": "default", "resourceVersion": str(self.rv)}
        self.objects[name] = {"metadata": meta, "data": dict(data)}

    def request(self, method: str, path: str, *, what: str, **kw: Any) -> Any:
        if method in ("POST", "PUT"):
            self.writes.append(method)
            if self.before_write:
                self.before_write.pop(0)(self)
        if method == "POST":
            body = kw["body"]
            name = body["metadata"]["name"]
            if name in self.objects:
                raise Conflict(f"{what}: configmaps {name!r} already exists")
            self._check_size(body, what)
            self.put(name, body["data"])
            return copy.deepcopy(self.objects[name])
        name = path.rsplit("/", 1)[1]
        if name not in self.objects:
            raise NotFound(f"{what}: not found")
        if method == "GET":
            return copy.deepcopy(self.objects[name])
        assert method == "PUT"
        body = kw["body"]
        if body["metadata"]["resourceVersion"] != self.objects[name]["metadata"]["resourceVersion"]:
            raise Conflict(f"{what}: the object has been modified")
        self._check_size(body, what)
        self.put(name, body["data"])
        return copy.deepcopy(self.objects[name])

    @staticmethod
    def _check_size(body: Any, what: str) -> None:
        if len(json.dumps(body)) > 1024 * 1024:
            raise OperationFailed(f"{what}: ConfigMap is invalid: Too long")

    def close(self) -> None:
        pass


NAME = "gpuops-node-history-test"


def store(api: FakeConfigMaps) -> historystore.Store:
    return historystore.Store(api, "test", "default")  # type: ignore[arg-type]


def other_writer(number: int) -> Any:
    def write(api: FakeConfigMaps) -> None:
        old = nh.decode((api.objects.get(NAME) or {}).get("data", {}).get(nh.HISTORY_KEY), WHERE)
        data = (api.objects.get(NAME) or {}).get("data", {})
        api.put(NAME, {**data, nh.HISTORY_KEY: nh.encode([*old, rec(number)])})

    return write


def test_a_concurrent_write_is_read_again_and_kept() -> None:
    api = FakeConfigMaps()
    api.put(NAME, {nh.HISTORY_KEY: nh.encode([rec(1)]), "other": "kept"})
    api.before_write = [other_writer(2), other_writer(3)]  # two 409s, then the write
    made = store(api).add(rec)
    assert made.number == 4 and api.writes == ["PUT", "PUT", "PUT"]
    assert [r.number for r in store(api).read()] == [1, 2, 3, 4]
    assert api.objects[NAME]["data"]["other"] == "kept"


def test_five_conflicts_fail_the_write_and_lose_nothing() -> None:
    api = FakeConfigMaps()
    api.put(NAME, {nh.HISTORY_KEY: nh.encode([rec(1)])})
    api.before_write = [other_writer(n) for n in range(2, 7)]
    with pytest.raises(OperationFailed, match="kept changing"):
        store(api).add(rec)
    assert api.writes == ["PUT"] * 5
    assert [r.number for r in store(api).read()] == [1, 2, 3, 4, 5, 6]


def test_the_first_create_race_reads_again_and_appends() -> None:
    api = FakeConfigMaps()  # no ConfigMap yet: both writers POST; the other one wins
    api.before_write = [other_writer(1)]
    made = store(api).add(rec)
    assert made.number == 2 and api.writes == ["POST", "PUT"]
    assert [r.number for r in store(api).read()] == [1, 2]


def test_a_configmap_deleted_between_read_and_write_is_read_again() -> None:
    api = FakeConfigMaps()
    api.put(NAME, {nh.HISTORY_KEY: nh.encode([rec(1)])})
    api.before_write = [lambda a: a.objects.pop(NAME)]
    made = store(api).add(rec)
    assert api.writes == ["PUT", "POST"] and made.number == 1
    assert [r.number for r in store(api).read()] == [1]


def test_a_full_history_of_a_200_host_fleet_is_still_written() -> None:
    api = FakeConfigMaps()
    reason = "validation failed on the host: dcgmi diag -r 1 (DCGM 4.1.1): " + "x" * 400
    old = [fleet_record(n, reason=reason) for n in range(1, 100)]
    api.put(NAME, {nh.HISTORY_KEY: nh.encode(nh.trim(old))})
    made = store(api).add(lambda n: fleet_record(n, reason=reason))
    kept = store(api).read()
    assert kept[-1] == made and made.number == 100
    assert len(api.objects[NAME]["data"][nh.HISTORY_KEY]) <= nh.MAX_BYTES


def test_the_revision_says_whether_the_work_tree_is_dirty(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty",
        "-m", "empty")  # fmt: skip
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    assert gitrev.dirty(tmp_path) is True  # a file not committed
    git("add", "hosts.yml")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "inv")
    assert gitrev.dirty(tmp_path) is False and gitrev.revision(tmp_path) is not None
    (tmp_path / "hosts.yml").write_text("all: {hosts: {}}\n")
    assert gitrev.dirty(tmp_path) is True  # a tracked file changed
    assert gitrev.dirty(tmp_path / "absent") is None
    ro = Rollout("/inv", "gpu_h800", "test", [], rollout.Policy(), False, None)
    r = historystore.new_record(1, inventory("a"), ro, revision="f" * 40, dirty=True)
    assert nh.decode(nh.encode([r]), WHERE)[0].inventory_dirty is True
    doc = history_doc()
    doc["records"][0].update(inventory_revision="f" * 40, inventory_dirty=True)
    assert "inventory ffffffffffff (uncommitted changes)" in history_text(doc)
