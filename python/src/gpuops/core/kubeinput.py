"""Validation and parsing of Kubernetes-shaped user input: names, selectors, tolerations.

Every function raises :class:`~gpuops.errors.InvalidInput` naming the input (``what``) and the
offending value, before anything reaches a cluster. Values come from the command line (strings)
or from the JSON parameters file (strings, objects, lists).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gpuops.core.kubemodel import (
    AFFINITY_OPERATORS,
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
    NodeSelectorTerm,
    Requirement,
    Toleration,
)
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DIGITS = re.compile(r"[0-9]{1,9}")
_MAX_COUNT = 10**9


def dns_label(value: str, what: str) -> str:
    """A namespace name: RFC 1123 label, at most 63 characters."""
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise InvalidInput(
            f"{what} {shown(value)} is not a valid name: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return value


def dns_subdomain(value: str, what: str) -> str:
    """An object name (pod, deployment, job): RFC 1123 subdomain, at most 253 characters."""
    if not isinstance(value, str) or len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise InvalidInput(
            f"{what} {shown(value)} is not a valid name: lowercase letters, digits, '-' and '.', "
            "at most 253 characters"
        )
    return value


def qualified_name(value: str, what: str) -> str:
    """A label key, taint key or resource name: ``[prefix/]name``."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} {shown(value)} must be a string")
    prefix, slash, name = value.rpartition("/")
    ok = bool(name) and len(name) <= 63 and bool(_NAME_PART.fullmatch(name))
    if slash:
        ok = ok and len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(prefix))
    if not ok:
        raise InvalidInput(
            f"{what} {shown(value)} is not a valid key: an optional DNS prefix and '/', then "
            "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
            "digit"
        )
    return value


def extended_resource(value: str, what: str) -> str:
    """An extended resource name as Kubernetes accepts one: ``domain/name`` (e.g.
    ``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``), outside the ``kubernetes.io`` domain."""
    qualified_name(value, what)
    prefix, slash, _ = value.rpartition("/")
    if not slash or prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        raise InvalidInput(
            f"{what} {shown(value)} is not an extended resource name: it needs a domain prefix "
            "outside kubernetes.io, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb"
        )
    return value


def label_value(value: str, what: str) -> str:
    if not isinstance(value, str) or len(value) > 63 or (value and not _NAME_PART.fullmatch(value)):
        raise InvalidInput(
            f"{what} {shown(value)} is not a valid label value: at most 63 letters, digits, '-', "
            "'_' or '.', starting and ending with a letter or digit"
        )
    return value


def _json_or_none(value: str) -> Any:
    text = value.strip()
    if not text.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidInput(f"{shown(text)} is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{shown(text)} is not valid JSON: {exc.msg} at column {exc.colno}"
        ) from None


def parse_node_selector(value: str | Mapping[str, Any] | None) -> dict[str, str]:
    """``k=v,k2=v2`` or a JSON object (string or mapping) -> validated selector."""
    if value is None or value == "":
        return {}
    what = "node selector"
    raw: Any = value
    if isinstance(value, str):
        raw = _json_or_none(value)
        if raw is None:
            raw = {}
            for part in value.split(","):
                key, eq, val = part.strip(" ").partition("=")
                if not eq or not key.strip(" "):
                    raise InvalidInput(
                        f"{what} {shown(value)}: {shown(part.strip(' '))} is not key=value",
                        hint="write the selector as key=value,key2=value2 or a JSON object",
                    )
                key, val = key.strip(" "), val.strip(" ").removeprefix("=").strip(" ")
                if key in raw and raw[key] != val:
                    raise InvalidInput(f"{what} {shown(value)} gives {shown(key)} two values")
                raw[key] = val
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{what} must be key=value pairs or a JSON object, not {shown(raw)}")
    out: dict[str, str] = {}
    for key, val in raw.items():
        qualified_name(key, f"{what} key")
        if not isinstance(val, str):
            raise InvalidInput(f"{what} value of {shown(key)} must be a string, not {shown(val)}")
        out[key] = label_value(val, f"{what} value of {shown(key)}")
    return out


def _toleration(doc: Any, what: str) -> Toleration:
    if not isinstance(doc, Mapping):
        raise InvalidInput(
            f"{what} {shown(doc)} must be an object with key, operator, value, effect"
        )
    unknown = set(doc) - {"key", "operator", "value", "effect", "tolerationSeconds"}
    if unknown:
        raise InvalidInput(f"{what} {shown(doc)} has unknown field(s) {shown(sorted(unknown))}")
    key = doc.get("key") or ""
    operator = doc.get("operator") or "Equal"
    val = doc.get("value") or ""
    effect = doc.get("effect") or ""
    if key:
        qualified_name(key, f"{what} key")
    if operator not in TOLERATION_OPERATORS:
        raise InvalidInput(
            f"{what} operator {shown(operator)} must be one of {TOLERATION_OPERATORS}"
        )
    if operator == "Exists" and val:
        raise InvalidInput(f"{what} {shown(doc)}: operator Exists takes no value")
    if not key and operator != "Exists":
        raise InvalidInput(f"{what} {shown(doc)}: an empty key needs operator Exists")
    if effect and effect not in TAINT_EFFECTS:
        raise InvalidInput(
            f"{what} effect {shown(effect)} must be one of {', '.join(TAINT_EFFECTS)}"
        )
    label_value(val, f"{what} value")
    return Toleration(key=key, operator=operator, value=val, effect=effect)


def _toleration_text(part: str, what: str) -> Toleration:
    """``key=value:Effect``, ``key:Effect``, ``key=value``, ``key`` (Exists), ``*`` (all)."""
    body, colon, effect = part.partition(":")
    if part == "*":
        return Toleration(operator="Exists")
    key, eq, val = body.partition("=")
    doc: dict[str, str] = {"key": key.strip(" "), "operator": "Equal" if eq else "Exists"}
    if eq:
        doc["value"] = val.strip(" ")
    if colon:
        doc["effect"] = effect.strip(" ")
    if not doc["key"]:
        raise InvalidInput(f"{what} {shown(part)} has no key", hint="write key=value:Effect")
    return _toleration(doc, what)


def parse_tolerations(value: str | list[Any] | None) -> tuple[Toleration, ...]:
    """A JSON list of tolerations, or ``key=value:Effect,key:Effect`` on the command line."""
    if value is None or value == "":
        return ()
    what = "toleration"
    raw: Any = value
    if isinstance(value, str):
        raw = _json_or_none(value)
        if raw is None:
            parts = [p.strip(" ") for p in value.split(",")]
            if "" in parts:  # refused, never dropped: a, ,b is a typo, not two tolerations
                raise InvalidInput(f"{what}s {shown(value)} hold an empty item")
            return tuple(_toleration_text(p, what) for p in parts)
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise InvalidInput(f"tolerations must be a JSON list of objects, not {shown(raw)}")
    return tuple(_toleration(doc, what) for doc in raw)


def _requirement(doc: Any, what: str, *, field_ok: bool = False) -> Requirement:
    if not isinstance(doc, Mapping) or "key" not in doc or "operator" not in doc:
        raise InvalidInput(f"{what} {shown(doc)} must be an object with key, operator, values")
    key, op, values = doc["key"], doc["operator"], doc.get("values") or []
    if field_ok:
        if key != "metadata.name":
            raise InvalidInput(f"{what} field {shown(key)}: only metadata.name is supported")
    else:
        qualified_name(key, f"{what} key")
    if op not in AFFINITY_OPERATORS:
        raise InvalidInput(
            f"{what} operator {shown(op)} must be one of {', '.join(AFFINITY_OPERATORS)}"
        )
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidInput(f"{what} values of {shown(key)} must be a list of strings")
    if op in ("In", "NotIn") and not values:
        raise InvalidInput(f"{what} {shown(key)} {op} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise InvalidInput(f"{what} {shown(key)} {op} takes no values")
    if op in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"-?[0-9]{1,18}", values[0])):
        raise InvalidInput(f"{what} {shown(key)} {op} needs exactly one integer value")
    return Requirement(key, op, tuple(values))


def parse_node_affinity(
    value: str | Mapping[str, Any] | list[Any] | None,
) -> tuple[NodeSelectorTerm, ...] | None:
    """Required node affinity: a JSON list of ``nodeSelectorTerms``, or an object holding them
    (``{"nodeSelectorTerms": [...]}`` or a pod's ``nodeAffinity`` /
    ``requiredDuringSchedulingIgnoredDuringExecution``)."""
    if value is None or value == "":
        return None
    what = "node affinity"
    raw: Any = value
    if isinstance(value, str):
        raw = _json_or_none(value)
        if raw is None:
            raise InvalidInput(f"{what} {shown(value)} must be JSON (a list of nodeSelectorTerms)")
    if isinstance(raw, Mapping):
        for key in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
            raw = raw.get(key, raw)
            if not isinstance(raw, Mapping):
                raise InvalidInput(f"{what}: {key} must be an object, not {shown(raw)}")
        if "nodeSelectorTerms" not in raw:
            raise InvalidInput(f"{what} object needs nodeSelectorTerms, got {shown(raw)}")
        raw = raw["nodeSelectorTerms"]
    if not isinstance(raw, list):
        raise InvalidInput(f"{what} must be a list of nodeSelectorTerms, not {shown(raw)}")
    terms = []
    for term in raw:
        if not isinstance(term, Mapping) or set(term) - {"matchExpressions", "matchFields"}:
            raise InvalidInput(
                f"{what} term {shown(term)} may hold only matchExpressions/matchFields"
            )
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not isinstance(exprs, list) or not isinstance(fields, list):
            raise InvalidInput(f"{what} term {shown(term)}: matchExpressions/matchFields are lists")
        terms.append(
            NodeSelectorTerm(
                tuple(_requirement(r, what) for r in exprs),
                tuple(_requirement(r, what, field_ok=True) for r in fields),
            )
        )
    return tuple(terms)


def parse_class_counts(value: str | Mapping[str, Any] | None, what: str) -> dict[str, int]:
    """``class=n,class2=m`` or a JSON object of non-negative integers."""
    if value is None or value == "":
        return {}
    raw: Any = value
    if isinstance(value, str):
        raw = _json_or_none(value)
        if raw is None:
            raw = {}
            for part in value.split(","):
                key, eq, num = part.strip(" ").partition("=")
                if not eq or not key.strip(" "):
                    raise InvalidInput(
                        f"{what} {shown(value)}: {shown(part.strip(' '))} is not class=number"
                    )
                raw[key.strip(" ")] = num.strip(" ")
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{what} must be class=number pairs or a JSON object, not {shown(raw)}")
    out: dict[str, int] = {}
    for key, num in raw.items():
        label_value(key, f"{what} class")
        if isinstance(num, str) and _DIGITS.fullmatch(num):
            count = int(num)
        elif isinstance(num, int) and not isinstance(num, bool):
            count = num
        else:
            count = -1
        if count < 0 or count > _MAX_COUNT:
            raise InvalidInput(
                f"{what} for class {shown(key)} must be a whole number from 0 to {_MAX_COUNT}, "
                f"not {shown(num)}"
            )
        out[key] = count
    return out
