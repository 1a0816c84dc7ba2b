"""Property tests (hypothesis) of what reaches gpuops from outside: any JSON value in any
option, any JSON the Kubernetes API could send. A bad value is an input error naming its key
(exit 2); an API answer of the wrong shape fails the operation (exit 1); nothing else escapes.

The options come from the click tree itself, so options and commands added later are covered
without touching this file. The same values against a real cluster, end to end through the
CLI: tests/python/integration/test_fuzz_cli.py.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuops.adapters.kube.decode import (
    label_selector,
    node_from_api,
    node_from_api_checked,
    pod_from_api,
    pod_from_api_checked,
    quota_limits_from_api,
    scheduled_condition,
)
from gpuops.cli.base import _check_param
from gpuops.cli.main import COMMANDS, cli, plugin_commands
from gpuops.core.kubemodel import parse_quantity
from gpuops.errors import InvalidInput, OperationFailed

# bounded for a loaded 2-core CI machine: ~40 options x 2 paths, plus the decoders
OPTION_SETTINGS = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SETTINGS = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

#: Text that looks almost right: digits of other scripts, trailing newlines, signs, spaces.
TRICKY_TEXT = st.sampled_from(
    [
        "",
        " ",
        "4",
        "\uff14",
        "٤",
        "4\n",
        " 4",
        "+4",
        "-1",
        "4.7",
        "1e3",
        "true",
        "null",
        "Infinity",
        "NaN",
        "default\n",
        "nvidia.com/gpu\n",
        "a",
        "a=b",
        "a=b,c",
        "[]",
        "{}",
        '{"a": [1]}',
        "[2]",
        '[{"key": 1}]',
        '{"nodeAffinity": 5}',
        '{"nodeSelectorTerms": 5}',
        '[{"matchExpressions": 5}]',
        '[{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["\uff14"]}]}]',
        "x" * 5000,
        "\x00",
        "pod/",
        "deployment/x",
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | TRICKY_TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=10) | TRICKY_TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)


def _leaf_commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[str, click.Command]] = []

    def walk(path: str, command: click.Command | None) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(f"{path} {name}", command.get_command(ctx, name))
        elif command is not None:
            out.append((path, command))

    for name in sorted({*COMMANDS, *plugin_commands()}):
        walk(name, cli.get_command(ctx, name))
    return out


OPTIONS = [
    pytest.param(command, param, id=f"{path} {param.name}")
    for path, command in _leaf_commands()
    for param in command.params
    if param.name and param.name != "help"
]


@pytest.mark.parametrize(("command", "param"), OPTIONS)
@OPTION_SETTINGS
@given(value=JSON)
def test_any_json_value_in_the_params_file_is_taken_or_an_input_error_naming_its_key(
    command: click.Command, param: click.Parameter, value: Any
) -> None:
    ctx = click.Context(command)
    assert isinstance(param, click.Option | click.Argument)
    if isinstance(param, click.Argument):
        return  # arguments come from the command line only: see the next test
    try:
        _check_param(ctx, param, str(param.name), value)
    except InvalidInput as exc:
        assert exc.field == param.name
        assert len(exc.message) < 2000  # messages show values, never whole documents


@pytest.mark.parametrize(("command", "param"), OPTIONS)
@OPTION_SETTINGS
@given(text=st.text(max_size=30) | TRICKY_TEXT)
def test_any_text_on_the_command_line_is_taken_or_a_usage_error(
    command: click.Command, param: click.Parameter, text: str
) -> None:
    ctx = click.Context(command)
    if isinstance(param, click.Option) and param.is_flag:
        return
    try:
        param.type.convert(text, param, ctx)
    except click.BadParameter as exc:
        assert len(exc.format_message()) < 2000


# -- what the Kubernetes API sends -----------------------------------------------------------
def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right shape, or any JSON value in its place."""
    return strategy | JSON


def _obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An object with any subset of ``fields``, or any JSON value in its place."""
    return _maybe(st.fixed_dictionaries({}, optional=fields))


def _list(of: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return _maybe(st.lists(of, max_size=3))


QUANTITY = _maybe(st.sampled_from(["8", "0", "100m", "1Gi", "2e3", "1e999999999", "\uff18", "-1"]))
RESOURCES = _maybe(st.dictionaries(st.sampled_from(["nvidia.com/gpu", "pods", "cpu"]), QUANTITY))
TEXT = _maybe(st.text(max_size=8))
LABELS = _maybe(st.dictionaries(st.text(max_size=8), TEXT))
CONDITION = _obj(
    type=_maybe(st.sampled_from(["Ready", "PodScheduled"])),
    status=_maybe(st.sampled_from(["True", "False"])),
    reason=TEXT,
    message=TEXT,
)
OWNER = _obj(controller=JSON, kind=TEXT, name=TEXT)
METADATA = _obj(
    name=TEXT,
    namespace=TEXT,
    labels=LABELS,
    ownerReferences=_list(OWNER),
    creationTimestamp=TEXT,
)
REQUIREMENT = _obj(
    key=TEXT, operator=_maybe(st.sampled_from(["In", "Gt", "Exists"])), values=_list(TEXT)
)
TAINT = _obj(key=TEXT, value=TEXT, effect=TEXT)
NODE = _obj(
    metadata=METADATA,
    spec=_obj(taints=_list(TAINT), unschedulable=JSON),
    status=_obj(conditions=_list(CONDITION), allocatable=RESOURCES, capacity=RESOURCES),
)
CONTAINER = _obj(resources=_obj(requests=RESOURCES, limits=RESOURCES), restartPolicy=TEXT)
TERM = _obj(matchExpressions=_list(REQUIREMENT), matchFields=_list(REQUIREMENT))
AFFINITY = _obj(
    nodeAffinity=_obj(
        requiredDuringSchedulingIgnoredDuringExecution=_obj(nodeSelectorTerms=_list(TERM))
    )
)
POD = _obj(
    metadata=METADATA,
    spec=_obj(
        nodeName=TEXT,
        containers=_list(CONTAINER),
        initContainers=_list(CONTAINER),
        overhead=RESOURCES,
        nodeSelector=LABELS,
        tolerations=_list(_obj(key=TEXT, operator=TEXT, value=TEXT, effect=TEXT)),
        affinity=AFFINITY,
    ),
    status=_obj(phase=TEXT, conditions=_list(CONDITION)),
)
QUOTAS = _maybe(
    st.fixed_dictionaries(
        {
            "items": _list(
                _obj(
                    metadata=METADATA,
                    spec=_obj(hard=RESOURCES),
                    status=_obj(hard=RESOURCES, used=RESOURCES),
                )
            )
        }
    )
)
SELECTOR = _obj(matchLabels=LABELS, matchExpressions=_list(REQUIREMENT))


@SETTINGS
@given(obj=NODE)
def test_any_node_answer_decodes_or_fails_the_operation(obj: Any) -> None:
    for resources in (None, frozenset({"nvidia.com/gpu", "pods"})):
        try:
            node = node_from_api(obj, resources=resources)
        except OperationFailed:
            with pytest.raises(OperationFailed):  # the fast path agrees with the checked one
                node_from_api_checked(obj, resources=resources)
            continue
        assert node == node_from_api_checked(obj, resources=resources)
        assert all(isinstance(v, str) for v in node.labels.values())
        assert all(isinstance(v, int) for v in node.allocatable.values())


@SETTINGS
@given(obj=POD)
def test_any_pod_answer_decodes_or_fails_the_operation(obj: Any) -> None:
    for placement in (False, True):
        try:
            pod = pod_from_api(obj, with_placement=placement)
        except OperationFailed:
            with pytest.raises(OperationFailed):  # the fast path agrees with the checked one
                pod_from_api_checked(obj, with_placement=placement)
            continue
        assert pod == pod_from_api_checked(obj, with_placement=placement)
        with contextlib.suppress(OperationFailed):
            scheduled_condition(obj)
        assert all(isinstance(v, int) for v in pod.requests.values())
        for term in pod.placement.affinity or ():
            for req in term.expressions + term.fields:
                assert all(isinstance(v, str) for v in req.values)


@SETTINGS
@given(doc=QUOTAS)
def test_any_quota_answer_decodes_or_fails_the_operation(doc: Any) -> None:
    try:
        limits = quota_limits_from_api(doc, "ns", "nvidia.com/gpu")
    except OperationFailed:
        return
    assert all(isinstance(q.hard, int) and isinstance(q.used, int) for q in limits)


@SETTINGS
@given(selector=SELECTOR)
def test_any_workload_selector_decodes_or_fails_the_operation(selector: Any) -> None:
    with contextlib.suppress(OperationFailed):
        assert isinstance(label_selector(selector), str)


@pytest.mark.parametrize("text", ["\uff18", "\uff18Gi", "٤", "1e999999999", "1e-999999999", "8\n"])
def test_quantities_are_ascii_and_bounded(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def test_quantities_still_parse() -> None:
    assert parse_quantity("8") == 8 and parse_quantity("100m", milli=True) == 100
    assert parse_quantity("1Gi") == 2**30 and parse_quantity("2e3") == 2000
    assert parse_quantity(1.5) == 2 and parse_quantity("1e-3") == 1
    with pytest.raises(ValueError):
        parse_quantity(math.inf)
