"""Any JSON value in any field of any product command, against the real lab cluster.

Driven by ``gpuops describe``: every command it lists and every option of it, so commands
added later are covered without touching this file. Values come from hypothesis: plausible
ones (from the option's own description: ranges, choices, realistic examples of its type) and
arbitrary JSON, through the parameters file (as the Jenkins steps call) and through flags.
Whatever comes in, a command ends with an allowed exit code (never 5: that is a bug), prints
no traceback, and creates nothing on the cluster.

The ``nodes`` commands run against the lab's SSH fleet whose hosts are the kwok nodes of its
own cluster (the ``nodes_lab`` fixture), on a copy of its test inventory in each example's
scratch folder; ``nodes update`` always with ``--check`` and ``nodes label`` with
``--dry-run``, so that no example changes a host or a node the other tests start from.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.utils.display import Display
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from imagelab import cuda_12_2_base
from integration.conftest_kube import KubeLab
from integration.conftest_nodes import NodesLab
from integration.conftest_registry import RegistryLab, pushed_digest
from result_documents import load_document

from gpuops.cli.main import run
from gpuops_lab import kube as labkube

# Ansible's Display singleton wraps sys.stdout/stderr for fork safety when it is first made:
# make it now, on the process's real streams, not inside a call whose streams are this test's
# StringIO (which it cannot wrap, and then says so on stderr before gpuops' JSON document).
Display()

pytestmark = pytest.mark.timeout(900)
GPUOPS = str(Path(sys.executable).parent / "gpuops")


@dataclass(frozen=True)
class Env:
    """What a command needs to run for real here, and the exit codes allowed there."""

    #: the lab component it talks to: "kube", "files" (reads and writes files), "registry" (the
    #: lab registry and the lab's Podman; compat also asks the kube lab)
    needs: str = "kube"
    exits: frozenset[int] = field(default_factory=lambda: frozenset({0, 2, 3}))
    #: True: it may create objects in the registry (new tags and images: what it is for); never
    #: on the cluster, which the test checks for every command
    creates: bool = False
    #: options set in every example, whatever was drawn (dry runs of commands that change hosts)
    fixed: dict[str, Any] = field(default_factory=dict)
    #: how long one example may take (a real run over the fleet is ssh + Ansible)
    deadline_s: int = 30
    #: the fleet's cluster holds a real node change record, ``{record}`` in the examples
    history: bool = False


#: Commands that need something else than the defaults. A command not listed runs against the
#: kube lab and may end 0, 2 or 3; add it here if it needs another environment.
ENVIRONMENTS: dict[str, Env] = {
    "headroom check": Env(exits=frozenset({0, 2, 3})),
    "headroom explain": Env(exits=frozenset({0, 2})),
    # reads a result document and writes a page: a document it cannot read (whatever it
    # holds) is exit 2 naming the file, like any input
    "report capacity": Env(needs="files", exits=frozenset({0, 2})),
    "report fleet": Env(needs="fleet-files", exits=frozenset({0, 2})),
    "report node-update": Env(needs="fleet-files", exits=frozenset({0, 2})),
    "report node-history": Env(needs="fleet-files", exits=frozenset({0, 2})),
    # 3: the lab's faulty card is critical; 4: hosts not inspected (a mount it cannot read)
    # or a --pushgateway that does not answer; never --quarantine, which taints the faulty
    # host (test_nodes_quarantine.py runs it)
    "nodes inspect": Env(
        needs="fleet", exits=frozenset({0, 2, 3, 4}), fixed={"quarantine": False}, deadline_s=120
    ),
    # closes breakers of a state that is not there: 0, nothing made
    "nodes quarantine-reset": Env(exits=frozenset({0, 2})),
    "nodes label": Env(
        needs="fleet", exits=frozenset({0, 2, 4}), fixed={"dry_run": True}, deadline_s=120
    ),
    # the plan only: 1 = hosts failing in check mode, 3 = headroom gate, 4 = unreachable
    "nodes update": Env(
        needs="fleet", exits=frozenset({0, 1, 2, 3, 4}), fixed={"dry_run": True}, deadline_s=300
    ),
    # reads the fleet's node change history (4: a cluster it cannot reach)
    "nodes history": Env(needs="fleet", exits=frozenset({0, 2, 4}), deadline_s=60),
    # the plan only, against a real record (as nodes update: 1, 3, 4)
    "nodes rollback": Env(
        needs="fleet",
        exits=frozenset({0, 1, 2, 3, 4}),
        fixed={"check": True},
        deadline_s=300,
        history=True,
    ),
    # 1: the registry or the daemon refused (a tag it will not take, a build that fails);
    # 4: a registry that is not the lab's (nvcr.io: nothing outside is reachable here)
    "image build": Env(needs="registry", exits=frozenset({0, 1, 2, 4}), creates=True),
    "image tag": Env(needs="registry", exits=frozenset({0, 1, 2, 4}), creates=True),
    "image inspect": Env(needs="registry", exits=frozenset({0, 1, 2, 4})),
    "image compat": Env(needs="registry", exits=frozenset({0, 1, 2, 3, 4})),
    # a dry run only: the registry lab's Podman serves the whole session (a real clean, even
    # daemon-wide, is test_image_clean_lab's, on images it made)
    "image clean": Env(needs="registry", exits=frozenset({0, 1, 2, 4}), fixed={"dry_run": True}),
    # a dry run over the release scene's environments file (its repository in the lab
    # registry, its Deployment and history): a real prune is test_image_prune_lab's
    "image prune": Env(needs="release", exits=frozenset({0, 2, 3, 4}), fixed={"dry_run": True}),
    # registry.yml: a registry that is not running (nothing on its http.addr) whose storage
    # root is a folder of the scratch folder: gc runs on nothing of the session's (1: the
    # collector failed; 3: a registry that answers and is not read-only)
    "image gc": Env(needs="files", exits=frozenset({0, 1, 2, 3, 4})),
    "report prune": Env(needs="files", exits=frozenset({0, 2})),
    # an application's environments file in the scratch folder (the default --config), its
    # Deployment (0 replicas: a release creates no pods) and images in the lab registry.
    # promote and rollback really release (that Deployment, its history, the registry tag):
    # exit 3 is a gate's no (tag not there, approval missing), never 1 (no rollout can fail).
    "release promote": Env(needs="release", exits=frozenset({0, 2, 3}), creates=True),
    "release rollback": Env(needs="release", exits=frozenset({0, 2, 3}), creates=True),
    "release history": Env(needs="release", exits=frozenset({0, 2})),
    "release status": Env(needs="release", exits=frozenset({0, 2})),
    # in the environment with a strategy, where no release waits on its approval step: 2 (bad
    # input) or 3 (four eyes; nothing waits); nothing is changed
    "release resume": Env(
        needs="release", exits=frozenset({2, 3}), fixed={"environment": "canary"}
    ),
    # reads a release history result (history.json in the scratch folder) and writes a page
    "report releases": Env(needs="release", exits=frozenset({0, 2})),
    # no Jenkins can run here (see test_jenkins_apply.py): every URL is unreachable (exit 4)
    "jenkins apply": Env(needs="release", exits=frozenset({2, 4})),
}

#: Where plausible file paths point: ``{tmp}`` is the example's own scratch folder, which holds
#: a real ``headroom check --show-nodes`` result of the lab (``headroom.json``) and, for the
#: fleet's commands, a copy of the fleet's test inventory (``inventory/hosts.yml``) or real
#: results of ``nodes inspect`` and ``nodes update --check`` (``inspect.json``, ``update.json``).
TMP = "{tmp}"
INVENTORY = f"{TMP}/inventory/hosts.yml"
#: The id of a real node change record in the fleet's cluster (``nodes_record``).
RECORD = "{record}"
#: The lab registry's host:port; ``fuzz/app:1`` is an image pushed there (a CUDA 12.2 base).
REG = "{registry}"

#: Realistic values per option type name (``gpuops describe``'s "type"), so that examples get
#: past the first check and reach the cluster.
EXAMPLES: dict[str, list[Any]] = {
    "selector": ["accelerator=nvidia-h800", {"accelerator": "nvidia-a100-80g"}, ""],
    "affinity": [
        [
            {
                "matchExpressions": [
                    {"key": "accelerator", "operator": "In", "values": ["nvidia-h800"]}
                ]
            }
        ],
        '[{"matchExpressions": [{"key": "nvidia.com/gpu.count", "operator": "Gt", '
        '"values": ["4"]}]}]',
    ],
    "tolerations": ["dedicated=training:NoSchedule", [{"operator": "Exists"}], "*"],
    "counts": [{"nvidia-h800": 2}, "nvidia-a100-80g=8", {}],
    "namespace": ["default", "kube-system", "no-such-ns"],
    "resource": ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "example.com/fpga"],
    "label": ["accelerator", "nvidia.com/gpu.product", "kubernetes.io/hostname"],
    "env": ["GPUOPS_WEBHOOK_URL", "UNSET_HOOK_VAR"],
    "url": ["https://ci.example/job/1", "http://127.0.0.1:9/x"],
    "context": ["gpuops-lab", "no-such-context"],
    "workload": ["pod/fuzz-pending", "fuzz-pending", "pod/ghost", "deployment/ghost", "job/ghost"],
    "path": [
        f"{TMP}/headroom.json",
        f"{TMP}/page",
        f"{TMP}/missing.json",
        TMP,
        f"{TMP}/a/b/c",
        INVENTORY,
        f"{TMP}/inventory",
        f"{TMP}/inspect.json",
        f"{TMP}/update.json",
        f"{TMP}/ctx",
        f"{TMP}/ctx/Dockerfile",
        f"{TMP}/record.json",
        # special paths (laid out in every scratch folder): a device, a FIFO, a secret file,
        # a link to it
        "/dev/zero",
        f"{TMP}/fifo",
        f"{TMP}/secret",
        f"{TMP}/link-to-secret",
    ],
    "image": [
        f"{REG}/fuzz/app:1",
        f"{REG}/fuzz/app",
        f"{REG}/fuzz/ghost:1",
        "nvcr.io/nvidia/cuda:12.2.2-base-ubuntu22.04",
        f"{REG}/fuzz/app@sha256:" + "0" * 64,
    ],
    "tag": ["2", "staging", "latest", "v1.0.0-rc.1"],
    "revision": ["0123abc", "f" * 40],
    "key-values": [{"team": "ml"}, "team=ml", ["a=1", "b=2"]],
    "stage": ["app", "build", "runtime"],
    "platform": ["linux/amd64", "linux/arm64"],
    "version": ["12.2", "11.8", "12.4.1"],
    # Ansible host patterns: a model group, all GPU nodes, one host, a union, none
    "pattern": ["gpu_h800", "gpu_nodes", "gpu-a100-03", "gpu_h800:gpu_l40s", "no_such_group"],
    # a rollout's batch size
    "count or %": ["20%", "2", 1, "100%", "0", "150%", "5 %"],
    "environment": ["fuzz", "production", "no-such-env"],
    "user": ["release-manager", "ci@example.com"],
    "text": ["new tokenizer", ""],
    "commit": ["0123abc", "f" * 40],
}
#: The first plausible value of an option where the type's first example is not it, by command
#: and option name; the first call sets these even where the option is not required.
FIRST: dict[str, dict[str, Any]] = {
    "report capacity": {"out": f"{TMP}/page"},
    "image build": {
        "image": f"{REG}/fuzz/built",
        "context": f"{TMP}/ctx",
        "build_number": "7",
        "plain_http": True,
    },
    "image tag": {"plain_http": True},
    "image inspect": {"plain_http": True},
    "image compat": {"image": f"{REG}/fuzz/app:1", "plain_http": True},
    "nodes inspect": {"inventory": INVENTORY},
    "nodes label": {"inventory": INVENTORY},
    "nodes update": {"inventory": INVENTORY},
    "nodes history": {"inventory": INVENTORY},
    "nodes rollback": {"inventory": INVENTORY, "to": RECORD, "limit": "gpu-l40s-01"},
    "report fleet": {"input_path": f"{TMP}/inspect.json", "out": f"{TMP}/page"},
    "report node-update": {"input_path": f"{TMP}/update.json", "out": f"{TMP}/page"},
    "report node-history": {"input_path": f"{TMP}/node-history.json", "out": f"{TMP}/page"},
    "release promote": {"tag": "2"},
    "release rollback": {"previous": True},
    "release resume": {
        "environment": "canary",
        "approved_by": "release-manager",
        "requested_by": ["ci@example.com"],
    },
    "report releases": {"input_path": f"{TMP}/history.json", "out": f"{TMP}/page"},
    "image gc": {"registry_config": f"{TMP}/registry.yml"},
    "report prune": {"input_path": f"{TMP}/prune.json", "out": f"{TMP}/page"},
}

#: a distribution config of a registry that does not run (port 9, discard: nothing listens) and
#: whose storage is the scratch folder's regroot (relative: the command runs in the scratch folder)
REGISTRY_CONFIG = (
    "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: regroot\n  delete:\n"
    "    enabled: true\nhttp:\n  addr: 127.0.0.1:9\n"
)


def prune_result() -> str:
    """A real ``image prune`` result document (what ``report prune`` reads)."""
    from datetime import UTC, datetime

    from gpuops.core.retention import Image, Policy, decide
    from gpuops.usecases.retention.prune import PruneResult, RepositoryResult

    now = datetime(2026, 12, 2, tzinfo=UTC)
    images = [Image(f"sha256:{i:064x}", (f"b{i}",), now) for i in range(3)]
    repo = RepositoryResult("r.example/ai/infer", ["prod"], tags=3)
    repo.protected = {images[0].digest: ["prod release #1 (succeeded)"]}
    repo.decisions = decide(images, Policy(keep_last=1), repo.protected, now)
    repo.deleted = [images[2].digest]
    return json.dumps(PruneResult(False, "pruned", [repo], ["ns/lease"]).to_dict())


TRICKY = st.sampled_from(
    ["", " ", "\uff14", "4\n", "default\n", "nvidia.com/gpu\n", "a", "-1", "1e3", "Infinity",
     "[2]", '{"a": [1]}', "x" * 300, "pod/", "\x00", "$(reboot)", "../../etc/passwd",
     '{"nodeAffinity": 5}', '[{"matchExpressions": 5}]', '{"a": {"b": 1}}',
     # white space and controls str.strip() removed without a word, C1 controls, separators
     "default\u00a0", "\u00a0", "nvidia.com/gpu\u2028", "a\u2028b", "\u0085", "x\u0085",
     "gpu\x9b", "\x80\x9f", "v1\u2029", "\ufeffdefault", "a\u200bb", "@hosts.txt",
     "http://[::1"]
)  # fmt: skip
#: Keys of the objects the structured options take, so that arbitrary JSON often has their shape.
KEYS = st.sampled_from(
    ["key", "operator", "values", "value", "effect", "matchExpressions", "matchFields",
     "nodeSelectorTerms", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
     "accelerator", "In", "Exists", "Gt"]
) | st.text(max_size=6)  # fmt: skip
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


def _describe() -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["--output", "json", "describe"]) == 0
    commands: dict[str, Any] = json.loads(out.getvalue())["result"]["commands"]
    return commands


COMMANDS = _describe()


def _plausible(option: dict[str, Any], kubeconfig: str) -> st.SearchStrategy[Any]:
    if option["name"] == "kubeconfig":
        return st.just(kubeconfig)
    kind = option["type"]
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = option.get("minimum", -5)
        high = min(option.get("maximum", 64), low + 64)
        return st.integers(low, high) | st.integers(low, high).map(str)
    if kind == "choice":
        return st.sampled_from(option["choices"])
    return st.sampled_from(EXAMPLES[kind]) if kind in EXAMPLES else st.text(max_size=20)


def _value(option: dict[str, Any], kubeconfig: str) -> st.SearchStrategy[Any]:
    plausible = _plausible(option, kubeconfig)
    if option["name"] == "kubeconfig":  # mostly the lab's, so that most examples reach it
        return st.one_of(plausible, plausible, plausible, JSON)
    return st.one_of(plausible, plausible, JSON)


#: A change to the documents of an example's scratch folder: (which value, by its index among
#: all of a document's values; True: remove it, else put the JSON value there).
Mutation = tuple[int, bool, Any]
Call = tuple[dict[str, Any], list[str], list[Mutation]]


@st.composite
def _call(draw: st.DrawFn, path: str, kubeconfig: str) -> Call:
    """Option values (params file keys), arguments and document changes for one call of
    ``path``: half the examples read the documents as the commands wrote them."""
    doc = COMMANDS[path]
    fixed = ENVIRONMENTS.get(path, Env()).fixed
    params: dict[str, Any] = {}
    for option in doc["options"]:
        always = option["required"] or option["name"] == "kubeconfig"
        if option["name"] in fixed:
            params[option["name"]] = fixed[option["name"]]
        elif always or draw(st.booleans()):
            params[option["name"]] = draw(_value(option, kubeconfig))
    workloads = st.sampled_from(EXAMPLES["workload"])
    args = [draw(workloads | workloads | st.text(max_size=20)) for _ in doc["arguments"]]
    changes = st.tuples(st.integers(0, 10**6), st.booleans(), JSON)
    mutations = draw(st.lists(changes, min_size=1, max_size=3)) if draw(st.booleans()) else []
    return params, args, mutations


def _first_plausible(path: str, kubeconfig: str) -> Call:
    """The required options at their first plausible value, the rest left out: one call that
    should get a real answer from the cluster (the test checks that one did)."""
    env = ENVIRONMENTS.get(path, Env())
    params: dict[str, Any] = dict(env.fixed)
    first = FIRST.get(path, {})
    for option in COMMANDS[path]["options"]:
        name, kind = option["name"], option["type"]
        if name == "kubeconfig":
            params["kubeconfig"] = kubeconfig
        elif name in first:
            params[name] = first[name]
        elif option["required"]:
            params[name] = option.get("minimum", 1) if kind == "integer" else EXAMPLES[kind][0]
    return params, [EXAMPLES["workload"][0] for _ in COMMANDS[path]["arguments"]], []


def _value_paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every value's place in a decoded document (of a list, its first three items)."""
    found: list[tuple[Any, ...]] = []
    items = list(doc.items()) if isinstance(doc, dict) else []
    items += list(enumerate(doc[:3])) if isinstance(doc, list) else []
    for key, value in items:
        found.append((*at, key))
        found += _value_paths(value, (*at, key))
    return found


def _mutate(path: Path, mutations: list[Mutation]) -> None:
    """Apply ``mutations`` to the JSON or YAML document at ``path`` (written back as JSON,
    which YAML reads too): a value replaced by another of any kind, or removed."""
    doc = yaml.safe_load(path.read_text())
    for index, remove, drawn in mutations:
        places = _value_paths(doc)
        value = copy.deepcopy(drawn)  # never the same object twice (a document holding itself)
        if not places:
            doc = value
            continue
        place = places[index % len(places)]
        target = doc
        for step in place[:-1]:
            target = target[step]
        if remove:
            del target[place[-1]]
        else:
            target[place[-1]] = value
    path.write_text(json.dumps(doc))


def _flags(path: str, params: dict[str, Any]) -> list[str]:
    """The same values as a command line: each value as text (a flag when true)."""
    by_name = {o["name"]: o for o in COMMANDS[path]["options"]}
    argv = []
    for name, value in params.items():
        option = by_name[name]
        if option["type"] == "boolean" and option["json"] == ["boolean"]:
            if value is True:
                argv.append(option["flag"])
            continue
        if option.get("multiple") and isinstance(value, list):  # --requested-by a --requested-by b
            for item in value:
                argv += [option["flag"], item if isinstance(item, str) else json.dumps(item)]
            continue
        argv += [option["flag"], value if isinstance(value, str) else json.dumps(value)]
    return argv


def _objects(lab: KubeLab) -> set[tuple[str, str, str]]:
    """Every object gpuops could create: (kind, namespace/name, uid)."""
    found: set[tuple[str, str, str]] = set()
    for kind, items in (
        ("Namespace", lab.core.list_namespace().items),
        ("Pod", lab.core.list_pod_for_all_namespaces().items),
        ("ResourceQuota", lab.core.list_resource_quota_for_all_namespaces().items),
        ("Deployment", lab.apps.list_deployment_for_all_namespaces().items),
        ("Job", lab.batch.list_job_for_all_namespaces().items),
        ("Node", lab.core.list_node().items),
    ):
        found |= {(kind, f"{o.metadata.namespace}/{o.metadata.name}", o.metadata.uid)
                  for o in items}  # fmt: skip
    return found


def _in(places: dict[str, str], value: Any) -> Any:
    """``value`` with the placeholders (``{tmp}``, ``{registry}``) replaced wherever it holds
    text."""
    if isinstance(value, str):
        for placeholder, real in places.items():
            value = value.replace(placeholder, real)
        return value
    if isinstance(value, list | tuple):
        return type(value)(_in(places, v) for v in value)
    if isinstance(value, dict):
        return {k: _in(places, v) for k, v in value.items()}
    return value


def _one(path: str, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


SETTINGS = settings(
    max_examples=40,  # per command and way in: bounded for a loaded 2-core CI machine
    deadline=timedelta(seconds=30),  # one call against the lab, on a loaded machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def pending_pod(kube_lab: KubeLab) -> Iterator[str]:
    """A pod no node can take, in ``default``: something for ``explain`` to explain."""
    body = labkube.pod_body("fuzz-pending", gpus=1024)
    kube_lab.core.create_namespaced_pod("default", body)
    yield "fuzz-pending"
    kube_lab.core.delete_namespaced_pod("fuzz-pending", "default", grace_period_seconds=0)


@pytest.fixture(scope="module")
def headroom_result(kube_lab: KubeLab) -> str:
    """A real ``headroom check --show-nodes`` result of the lab: the input reports read."""
    code, out, err = _one("headroom check", ["--output", "json", "headroom", "check",
                                             "--kubeconfig", str(kube_lab.kubeconfig),
                                             "--gpus-per-pod", "1", "--show-nodes"])  # fmt: skip
    assert code in (0, 3), err
    return out


@pytest.fixture(scope="module")
def nodes_results(nodes_lab: NodesLab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Real ``nodes inspect`` and ``nodes update --check`` results of the fleet: the input of
    the nodes' report pages."""
    tmp = tmp_path_factory.mktemp("nodes-results")
    inventory = str(nodes_lab.inventory(tmp))
    keys = ["--known-hosts", nodes_lab.fleet.facts["known_hosts"]]
    docs = {
        "inspect.json": tmp / "inspect.json",
        "update.json": tmp / "update.json",
        "node-history.json": tmp / "node-history.json",
    }
    calls = {
        "inspect.json": ["nodes", "inspect", "-i", inventory, *keys],
        "update.json": ["nodes", "update", "-i", inventory, "--check", *keys,
                        "--kubeconfig", str(nodes_lab.kube.kubeconfig),
                        "--artifacts-dir", str(tmp / "update")],
        "node-history.json": ["nodes", "history", "-i", inventory,
                              "--kubeconfig", str(nodes_lab.kube.kubeconfig)],
    }  # fmt: skip
    for name, words in calls.items():  # the documents as Jenkins gets them: files
        code, _, err = _one(words[1], ["--result-file", str(docs[name]),
                                       "--error-file", str(docs[name]), *words])  # fmt: skip
        assert code in (0, 3), err  # inspect: 3, the lab's faulty card
    documents = {name: path.read_text() for name, path in docs.items()}
    for name, text in documents.items():
        key = "records" if name == "node-history.json" else "hosts"
        assert isinstance(json.loads(text)["result"][key], list), text[:300]
    return documents


@pytest.fixture(scope="module")
def nodes_record(nodes_lab: NodesLab, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real node change record in the fleet's cluster: ``nodes update`` of one host whose
    driver is already the inventory's (nothing changes; the run is recorded all the same)."""
    tmp = tmp_path_factory.mktemp("nodes-record")
    run = nodes_lab.gpuops(
        "nodes", "update", "-i", nodes_lab.fleet.facts["inventory"], "-l", "gpu-l40s-01",
        "--change", "driver", tmp=tmp,
    )  # fmt: skip
    assert run.rc == 0, run.stderr
    record = run.result["record"]
    assert isinstance(record, str) and record, run.result
    return record


@pytest.fixture(scope="module")
def fuzz_image(registry_lab: RegistryLab) -> str:
    """``<lab registry>/fuzz/app:1``: an image on a CUDA 12.2.2 base, as NVIDIA builds theirs."""
    ref = f"{registry_lab.url}/fuzz/app:1"
    registry_lab.build(ref, cuda_12_2_base(registry_lab.base_image))
    pushed_digest(registry_lab.push(ref))
    return ref


#: The releases' image repository: only the release commands' examples name it.
RELEASE_REPO = "fuzz/release"


def release_file(registry: str, namespace: str) -> str:
    """The application's ``gpuops-release.yaml`` for the fuzz Deployment."""
    common = {
        "namespace": namespace,
        "deployment": "app",
        "container": "app",
        "node_class": "nvidia-h800",
        "registry": {"plain_http": True},
        "registry_tag": "current",
        "rollout": {"ready_seconds": 10, "unschedulable_seconds": 5},
        "lock": {"lease_seconds": 8},
    }
    return json.dumps(
        {
            "image": f"{registry}/{RELEASE_REPO}",
            "jenkins": {
                "folder": "fuzz",
                "name": "app",
                "repository": "https://git.example.invalid/fuzz/app.git",
                "credentials": "git-ci",
                "jenkinsfile": "Jenkinsfile",
            },
            "environments": {
                "fuzz": common,
                "production": {**common, "approval": {"approvers": ["release-managers"]}},
                # only release resume's examples name it (a promote there would make a canary)
                "canary": {
                    **common,
                    "strategy": {
                        "steps": [
                            {"replicas": 1},
                            {"approval": {"approvers": ["release-managers"]}},
                        ]
                    },
                },
            },
        }
    )  # JSON is YAML


@pytest.fixture(scope="module")
def release_app(kube_lab: KubeLab, registry_lab: RegistryLab) -> Iterator[tuple[str, str]]:
    """Namespace with Deployment ``app`` (0 replicas) released twice with gpuops (tags 2 then
    1, so that rollback has a previous release); returns the namespace and its history (the
    result document of ``release history``, what ``report releases`` reads)."""
    digests = {}
    for tag in ("1", "2"):
        ref = f"{registry_lab.url}/{RELEASE_REPO}:{tag}"
        registry_lab.build(ref, cuda_12_2_base(registry_lab.base_image) + f"LABEL v={tag}\n")
        digests[tag] = pushed_digest(registry_lab.push(ref))
    namespace = f"fuzzrel-{uuid.uuid4().hex[:5]}"
    kube_lab.core.create_namespace({"metadata": {"name": namespace}})
    container = {
        "name": "app",
        "image": f"{registry_lab.url}/{RELEASE_REPO}:1@{digests['1']}",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    labels = {"app": "app"}
    kube_lab.apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "app"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"accelerator": "nvidia-h800"},
                        "containers": [container],
                    },
                },
            },
        },
    )
    with tempfile.TemporaryDirectory(prefix="gpuops-fuzz-") as tmp:
        (Path(tmp) / "gpuops-release.yaml").write_text(release_file(registry_lab.url, namespace))
        for tag in ("2", "1"):
            argv = ["--output", "json", "release", "promote", "-e", "fuzz", "--tag", tag,
                    "--kubeconfig", str(kube_lab.kubeconfig)]  # fmt: skip
            with contextlib.chdir(tmp):
                code, _, err = _one("release promote", argv)
            assert code == 0, err
        argv = ["--output", "json", "release", "history", "-e", "fuzz",
                "--kubeconfig", str(kube_lab.kubeconfig)]  # fmt: skip
        with contextlib.chdir(tmp):
            code, history, err = _one("release history", argv)
        assert code == 0, err
    yield namespace, history
    kube_lab.core.delete_namespace(namespace)


@dataclass
class Scene:
    """What one command's examples run against: the cluster, the placeholders' values, and the
    files laid out in each example's scratch folder (name -> text; name -> folder to copy)."""

    cluster: KubeLab
    places: dict[str, str]
    files: dict[str, str]
    folders: dict[str, Path] = field(default_factory=dict)

    def lay_out(self, tmp: Path, mutations: list[Mutation]) -> None:
        """The files, the folders and the special paths (a FIFO, a secret file and a link to
        it); with ``mutations`` applied to every document the commands read (report inputs,
        the environments file, the inventory)."""
        for name, text in self.files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)
        for name, folder in self.folders.items():
            shutil.copytree(folder, tmp / name)
        _special_files(tmp)
        if mutations:
            for name in [*self.files, "inventory/hosts.yml"]:
                if name.endswith((".json", ".yaml", ".yml")) and (tmp / name).is_file():
                    _mutate(tmp / name, mutations)


def _scene(
    env: Env,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    kube_lab: KubeLab,
    headroom_result: str,
) -> Scene:
    """Start (through their fixtures) only the labs ``env`` needs, and say what to lay out."""
    scene = Scene(kube_lab, {REG: "registry.invalid"}, {"headroom.json": headroom_result})
    if env.needs == "files":
        scene.files["registry.yml"] = REGISTRY_CONFIG
        scene.files["prune.json"] = prune_result()
    if env.needs == "registry":  # only these commands start the registry lab
        rlab: RegistryLab = request.getfixturevalue("registry_lab")
        request.getfixturevalue("fuzz_image")
        scene.places[REG] = rlab.url
        monkeypatch.setenv("DOCKER_HOST", str(rlab.builder["base_url"]))
        monkeypatch.setenv("DOCKER_API_VERSION", "1.41")
        scene.files["ctx/Dockerfile"] = f"FROM {rlab.base_image}\nLABEL fuzz=1\n"
    if env.needs == "fleet":  # the fleet and its own cluster: hosts are its nodes
        nodes: NodesLab = request.getfixturevalue("nodes_lab")
        scene.cluster = nodes.kube
        scene.folders["inventory"] = Path(nodes.fleet.facts["inventory"]).parent
        if env.history:
            scene.places[RECORD] = request.getfixturevalue("nodes_record")
    if env.needs == "fleet-files":
        scene.files.update(request.getfixturevalue("nodes_results"))
    if env.needs == "release":  # the registry lab, images, a Deployment, an environments file
        rlab = request.getfixturevalue("registry_lab")
        scene.places[REG] = rlab.url
        release_ns, release_history = request.getfixturevalue("release_app")
        scene.files["gpuops-release.yaml"] = release_file(rlab.url, release_ns)
        scene.files["history.json"] = release_history
    return scene


@pytest.fixture
def memory_cap() -> Iterator[None]:
    """This process's address space capped at what it has now + 4 GiB while the examples run:
    a read of /dev/zero that does not stop (a reader not bounded) is a MemoryError (exit 5,
    a failure here), not the machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with Path("/proc/self/status").open() as status:
        size_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, ((size_kib << 10) + (4 << 30), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("how", ["params", "flags"])
@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_any_value_in_any_field_ends_cleanly_and_creates_nothing(
    kube_lab: KubeLab,
    pending_pod: str,
    headroom_result: str,
    request: pytest.FixtureRequest,
    path: str,
    how: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = ENVIRONMENTS.get(path, Env())
    assert env.needs in ("kube", "files", "registry", "fleet", "fleet-files", "release"), (
        f"gpuops {path} needs {env.needs}: add it"
    )
    for var in ("KUBECONFIG", "GPUOPS_PARAMS_FILE", "GPUOPS_RESULT_FILE", "GPUOPS_ERROR_FILE",
                "GPUOPS_WEBHOOK_URL", "GPUOPS_OUTPUT", "GPUOPS_REGISTRY_CA",
                "GPUOPS_REGISTRY_USERNAME", "GPUOPS_REGISTRY_PASSWORD", "GPUOPS_SSH_KEY_FILE",
                "GPUOPS_SSH_USER", "GPUOPS_RELEASE_CONFIG", "JENKINS_URL", "GPUOPS_JENKINS_USER",
                "GPUOPS_JENKINS_TOKEN"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    scene = _scene(env, request, monkeypatch, kube_lab, headroom_result)
    cluster = scene.cluster
    before = _objects(cluster)
    request.getfixturevalue("memory_cap")  # after the labs' fixtures started their daemons
    seen: set[int] = set()

    @settings(SETTINGS, deadline=timedelta(seconds=env.deadline_s))
    @example(call=_first_plausible(path, str(cluster.kubeconfig)))
    @given(call=_call(path, str(cluster.kubeconfig)))
    def check(call: Call) -> None:
        with tempfile.TemporaryDirectory(prefix="gpuops-fuzz-") as tmp:
            params, args, mutations = _in({**scene.places, TMP: tmp}, call)
            scene.lay_out(Path(tmp), mutations)
            argv = ["--output", "json"]
            if how == "params":
                pfile = Path(tmp) / "params.json"
                pfile.write_text(json.dumps(params))
                argv += ["--params-file", str(pfile), *path.split(), *args]
            else:
                argv += [*path.split(), *_flags(path, params), "--", *args]
            with contextlib.chdir(tmp):  # a relative path lands in the scratch folder
                code, out, err = _one(path, argv)
        seen.add(code)
        assert code in env.exits, f"exit {code}: {err or out}"
        assert "Traceback" not in out + err
        assert SECRET_CANARY not in out + err, "a secret file's content was echoed"
        if code != 0:
            error = json.loads(err)["error"]
            assert error["category"] != "internal"
            assert error["exit_code"] == code

    check()
    assert _objects(cluster) - before == set(), "gpuops created objects on the cluster"
    # the examples reached the input checks, and some got past them to a real answer
    assert 2 in seen and seen - {2}, seen
    print(f"gpuops {path} ({how}): exit codes seen {sorted(seen)}")


# -- special paths: a device, a FIFO, a link, a secret file, wherever gpuops reads a file ------

#: What a secret file holds: none of it may appear in any output.
SECRET_CANARY = "s3cr3t-CANARY-hash-7f3a"
SECRET_TEXT = f"root:$y$j9T$saltsalt${SECRET_CANARY}:19000:0:99999:7:::\ndaemon:*:19000:::\n"
#: Each option that names a file gpuops reads, the command and what else it needs to get there.
READERS: list[tuple[str, list[str], str]] = [
    ("report capacity", ["--out", "{tmp}/page"], "--input"),
    ("report fleet", ["--out", "{tmp}/page"], "--input"),
    ("report node-update", ["--out", "{tmp}/page"], "--input"),
    ("report releases", ["--out", "{tmp}/page"], "--input"),
    ("report prune", ["--out", "{tmp}/page"], "--input"),
    ("image gc", [], "--registry-config"),
    ("release status", ["-e", "fuzz"], "--config"),
    ("release history", ["-e", "fuzz"], "--config"),
    ("jenkins apply", ["--url", "http://127.0.0.1:9/"], "--config"),
    ("nodes inspect", [], "--inventory"),
    ("nodes update", ["--check"], "--inventory"),
    ("nodes label", ["--dry-run"], "--inventory"),
    ("headroom check", ["--gpus-per-pod", "1"], "--kubeconfig"),
    ("image build", ["--image", "127.0.0.1:9/x/y", "--context", "{tmp}"], "--dockerfile"),
    ("describe", [], "--params-file"),
    ("headroom check", ["--gpus-per-pod", "1"], "--params-file"),
]
SPECIAL = ["/dev/zero", "{tmp}/fifo", "{tmp}/link-to-secret", "{tmp}/secret", "/etc/shadow"]


def _special_files(tmp: Path) -> None:
    os.mkfifo(tmp / "fifo")
    (tmp / "secret").write_text(SECRET_TEXT)
    (tmp / "secret").chmod(0o600)
    (tmp / "link-to-secret").symlink_to(tmp / "secret")


def _limited() -> None:  # in the child: 2 GiB of memory at most (a read of /dev/zero)
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("special", SPECIAL)
@pytest.mark.parametrize(
    ("path", "before", "option"), READERS, ids=[f"{p} {o}" for p, _, o in READERS]
)
def test_a_special_path_where_a_file_is_read_is_exit_2_and_never_echoed(
    tmp_path: Path, path: str, before: list[str], option: str, special: str
) -> None:
    """/dev/zero was exit 5 (the size cap looked at st_size, 0 for a device) or read without
    end; a FIFO blocked; a secret file's first key was echoed back. Each is exit 2 now, in
    time, without a byte of the file in any output."""
    _special_files(tmp_path)
    given = special.replace("{tmp}", str(tmp_path))
    words = [w.replace("{tmp}", str(tmp_path)) for w in before]
    argv = [option, given, *path.split(), *words] if option == "--params-file" else [
        *path.split(), *words, option, given]  # fmt: skip
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    try:
        done = subprocess.run(
            [GPUOPS, "--output", "json", "--error-file", str(tmp_path / "error.json"), *argv],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
            preexec_fn=_limited, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"gpuops {path} {option} {special}: no answer in 120 s (a FIFO read?)")
    error = tmp_path / "error.json"
    said = done.stdout + done.stderr + (error.read_text() if error.exists() else "")
    assert done.returncode == 2, said[-2000:]
    if error.exists():
        load_document(error)
    assert "Traceback" not in said
    assert SECRET_CANARY not in said and "19000" not in said and "daemon" not in said, said
