"""The disruption budget's options of ``gpuops nodes update`` (``usecases/nodes/budget.py``),
handed to the command as ``budget``: the gate's spec, or None when no limit is given."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuops.cli.types import Integer, Text
from gpuops.core import disruption, kubeinput
from gpuops.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])
NO_KURED = "none"


def _limit(value: str) -> str:
    disruption.parse_limits([value])
    return value


def _daemonset(value: str) -> str:
    if value == NO_KURED:
        return value
    namespace, sep, name = value.partition("/")
    if not sep:
        raise InvalidInput(f"{value!r}: expected NAMESPACE/NAME (or {NO_KURED})")
    kubeinput.dns_label(namespace, "--kured-daemonset namespace")
    kubeinput.dns_subdomain(name, "--kured-daemonset name")
    return value


def budget_options(f: F) -> F:
    """``--budget-max-unavailable`` (repeatable; the budget is asked only when given),
    ``--budget-wait``, ``--budget-lease`` and ``--kured-daemonset``."""

    @functools.wraps(f)
    def wrapper(
        *args: Any,
        budget_max_unavailable: tuple[str, ...],
        budget_wait: int,
        budget_lease: int,
        kured_daemonset: str,
        **kwargs: Any,
    ) -> Any:
        from gpuops.usecases.nodes.budget import BudgetSpec, Where  # noqa: PLC0415

        spec = None
        if budget_max_unavailable:
            ns, _, name = kured_daemonset.partition("/")
            spec = BudgetSpec(
                disruption.parse_limits(budget_max_unavailable),
                float(budget_wait),
                Where(
                    kured=None if kured_daemonset == NO_KURED else (ns, name),
                    lease_s=budget_lease,
                ),
            )
        return f(*args, budget=spec, **kwargs)

    options = [
        click.option(
            "--budget-max-unavailable",
            multiple=True,
            envvar="GPUOPS_BUDGET_MAX_UNAVAILABLE",
            type=Text("limit", _limit),
            help="Take each batch's nodes from the cluster's disruption budget (a Lease per "
            "GPU class, the node label nvidia.com/gpu.product, in namespace gpuops-system) "
            "that every gpuops run shares: N or N% for every class, CLASS=N[%] for one "
            "(repeat it). The strictest limit of the runs holding a class applies. Not given: "
            "the budget is not asked [env: GPUOPS_BUDGET_MAX_UNAVAILABLE, space-separated].",
        ),
        click.option(
            "--budget-wait",
            default=0,
            show_default=True,
            type=Integer(min=0, max=7 * 86400),
            help="Seconds a batch waits for the budget before the run is held (exit 3, naming "
            "the holders).",
        ),
        click.option(
            "--budget-lease",
            default=disruption.DEFAULT_LEASE_S,
            show_default=True,
            type=Integer(min=2, max=3600),
            help="Seconds this run's share stays valid without renewal (renewed every third of "
            "it): a run silent for longer (killed, stopped) is recovered by the next taker.",
        ),
        click.option(
            "--kured-daemonset",
            default="/".join(disruption.KURED_DAEMONSET),
            show_default=True,
            type=Text("daemonset", _daemonset),
            help="Kured's DaemonSet (NAMESPACE/NAME) whose lock annotation "
            f"{disruption.KURED_ANNOTATION} names a node being rebooted: it counts as "
            f"unavailable; '{NO_KURED}': do not read it.",
        ),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
