"""Report inputs are decoded strictly: whatever a file given to ``gpuops report`` holds, the
answer is a page (exit 0) or exit 2 naming the file, never exit 5.

Each kind starts from a real-shaped document (built by the code that makes it: the headroom
check, the host health judge, the rollout record, a release history) and every value in it, at
every depth, is replaced in turn by a value of each other JSON kind; documents that are not
JSON as gpuops writes it (NaN, a number too long to convert, nesting too deep, duplicate keys,
a byte order mark, invalid UTF-8) are refused the same way.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from test_gpuhealth import FAULTY, output
from test_headroom import node, pod, shape
from test_nodehistory import history_doc
from test_render_nodes import _rollout
from test_render_releases_page import _rec, _result

from gpuops.cli.main import run
from gpuops.core import gpuhealth, gpuparse
from gpuops.core.gpuhealth import Thresholds
from gpuops.core.headroom import check
from gpuops_lab import gpus


def _capacity() -> dict[str, Any]:
    nodes = [node("a1"), node("a2", unschedulable=True), node("h1", cls="nvidia-h800")]
    result = check(nodes, [pod("p", "a1", 7)], shape(2, pods=3))
    return result.to_dict(with_nodes=True)


def _fleet() -> dict[str, Any]:
    hosts = []
    for spec in (FAULTY,):
        health = gpuhealth.evaluate(
            spec.name, gpuparse.split_sections(output(gpus.host_state(spec))), 8, Thresholds()
        )
        hosts.append({**health.to_dict(), "group": spec.group})
    return {
        "environment": "test",
        "inventory": "inv/hosts.yml",
        "limit": None,
        "status": "critical",
        "summary": {"ok": 0, "warning": 0, "critical": 1, "unreachable": 0},
        "hosts_total": 1,
        "critical_hosts": [FAULTY.name],
        "unreachable_hosts": [],
        "hosts": hosts,
        "alerts": [{"host": FAULTY.name, "fingerprint": "f", "status": "sent", "detail": ""}],
        "thresholds": {"gpu_a100": asdict(Thresholds())},
        "timings_s": {"total": 1.0},
        "reports": {},
    }


def _node_update() -> dict[str, Any]:
    return _rollout().to_dict()


def _releases() -> dict[str, Any]:
    return _result(
        _rec(2, "failed", "2", failure={"kind": "rollout", "message": "x"}, link="https://ci/2"),
        _rec(1, "succeeded", "1", requested_by="me", approved_by="you", rolled_back_to=None),
        current=1,
    ) | {"deployments": ["app"], "open": {"2": "pending"}}


def _prune() -> dict[str, Any]:
    from datetime import UTC, datetime

    from gpuops.core.retention import Image, Policy, decide
    from gpuops.usecases.retention.prune import PruneResult, RepositoryResult

    now = datetime(2026, 12, 2, tzinfo=UTC)
    images = [Image(f"sha256:{i:064x}", (f"b{i}",), now) for i in range(3)]
    repo = RepositoryResult("r.example/ai/infer", ["prod"], tags=3)
    repo.protected = {images[0].digest: ["prod release #1 (succeeded)"]}
    repo.decisions = decide(images, Policy(keep_last=1), repo.protected, now)
    repo.deleted = [images[2].digest]
    return PruneResult(False, "pruned", [repo], ["ns/gpuops-release-infer"]).to_dict()  # type: ignore[return-value]


SEEDS = {
    "capacity": _capacity,
    "fleet": _fleet,
    "node-history": history_doc,
    "node-update": _node_update,
    "prune": _prune,
    "releases": _releases,
}
#: A value of each JSON kind (and the edges of numbers) to put where another one was.
WRONG: list[Any] = [None, True, -1, 1.5, "x", [], {}]


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every value's path in ``doc``; of a list, its first item only."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*at, key)
            yield from _paths(value, (*at, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:1]):
            yield (*at, i)
            yield from _paths(value, (*at, i))


#: In place of a value: the key removed (of an object), the item removed (of an array).
DELETED = object()


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    if value is DELETED:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def _report(tmp: Path, kind: str, text: str | bytes) -> tuple[int, dict[str, Any]]:
    path = tmp / "in.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run(["--output", "json", "report", kind, "--input", str(path),
                    "--out", str(tmp / "page")])  # fmt: skip
    return code, (json.loads(err.getvalue())["error"] if code else {})


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_the_seed_documents_render(tmp_path: Path, kind: str) -> None:
    code, error = _report(tmp_path, kind, json.dumps(SEEDS[kind]()))
    assert code == 0, error


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_any_value_of_the_wrong_kind_anywhere_is_a_page_or_exit_2_naming_the_file(
    tmp_path: Path, kind: str
) -> None:
    seed = SEEDS[kind]()
    bad: dict[str, Any] = {}
    for path in _paths(seed):
        for value in [*WRONG, DELETED]:
            code, error = _report(tmp_path, kind, json.dumps(_replaced(seed, path, value)))
            ok = code == 0 or (
                code == 2 and error.get("field") == "input" and "in.json" in error["message"]
            )
            if not ok:
                shown = "deleted" if value is DELETED else repr(value)
                bad.setdefault(f"{'.'.join(map(str, path))}={shown}", f"{code}: {error}")
    assert not bad, f"{len(bad)} failures, e.g.: " + json.dumps(
        dict(list(bad.items())[:12]), indent=1
    )


NOT_GPUOPS_JSON: list[str | bytes] = [
    '{"verdict": NaN}',
    '{"hosts": [Infinity]}',
    '{"a": ' + "1" * 5000 + "}",
    "[" * 100_000 + "]" * 100_000,
    '{"releases": [], "releases": 5}',
    "\ufeff{}",
    b'{"a": "\xff\xfe"}',
    b"\x00\x00\x00{",
    '{"a": "\\ud800"}',
]


@pytest.mark.parametrize("kind", sorted(SEEDS))
@pytest.mark.parametrize("text", NOT_GPUOPS_JSON, ids=lambda t: repr(t[:20]))
def test_a_document_that_is_not_json_as_gpuops_writes_it_is_exit_2(
    tmp_path: Path, kind: str, text: str | bytes
) -> None:
    code, error = _report(tmp_path, kind, text)
    assert code == 2, error
    assert error["field"] == "input" and "in.json" in error["message"], error
