"""gpuops's protobuf schema of node and pod LISTs (gpuops.adapters.kube.proto.SCHEMA) against
Kubernetes' own ``generated.proto`` files of the version the lab runs (k8s.io/api and
k8s.io/apimachinery from the Go module proxy, as the lab's build fetches them): every field
we read has Kubernetes' number, cardinality and type. The unit tests encode with our own
schema, so only this test can see a wrong number."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from gpuops.adapters.kube import proto as kubeproto

REPO = Path(__file__).resolve().parents[3]
#: where each message of SCHEMA is declared upstream
SOURCES = {
    "api": ["core/v1/generated.proto"],
    "apimachinery": [
        "pkg/api/resource/generated.proto",
        "pkg/apis/meta/v1/generated.proto",
        "pkg/runtime/generated.proto",
    ],
}
_MESSAGE = re.compile(r"^message (\w+) \{$(.*?)^\}$", re.M | re.S)
_FIELD = re.compile(r"^\s+(optional|repeated)?\s*([\w.<>, ]+?)\s+(\w+) = (\d+);$", re.M)


def module_dirs() -> dict[str, Path]:
    """The module folders of k8s.io/api and k8s.io/apimachinery that lab/kube's go.mod pins."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", "k8s.io/api", "k8s.io/apimachinery"],
        cwd=REPO / "lab" / "kube",
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    docs = json.loads("[" + out.replace("}\n{", "},\n{") + "]")
    return {d["Path"].split("/")[-1]: Path(d["Dir"]) for d in docs}


def upstream() -> dict[str, dict[str, tuple[str, str, int]]]:
    """message -> field -> (cardinality, type, number), from the generated.proto files."""
    dirs = module_dirs()
    messages: dict[str, dict[str, tuple[str, str, int]]] = {}
    for module, files in SOURCES.items():
        for rel in files:
            text = (dirs[module] / rel).read_text()
            for m in _MESSAGE.finditer(text):
                fields = messages.setdefault(m.group(1), {})
                for f in _FIELD.finditer(m.group(2)):
                    label, kind, name, number = f.groups()
                    fields[name] = (label or "map", kind.split(".")[-1], int(number))
    return messages


def test_every_field_read_has_kubernetes_number_and_type() -> None:
    theirs = upstream()
    checked = 0
    for message, fields in kubeproto.SCHEMA.items():
        assert message in theirs, f"{message} is not a Kubernetes message"
        for name, number, kind in fields:
            assert name in theirs[message], f"{message}.{name} is not in Kubernetes' {message}"
            label, their_kind, their_number = theirs[message][name]
            assert number == their_number, f"{message}.{name}: {number}, Kubernetes {their_number}"
            if isinstance(kind, str) and kind.startswith("map:"):
                assert label == "map" and their_kind.endswith(f"{kind[4:]}>"), (message, name)
            elif isinstance(kind, str):
                assert (label == "repeated") == kind.startswith("*"), (message, name)
                assert their_kind == kind.lstrip("*"), (message, name, their_kind)
            else:
                scalar = {"string": kubeproto._STRING, "bool": kubeproto._BOOL}
                scalar |= {"bytes": kubeproto._BYTES, "int32": kubeproto._INT32}
                assert scalar.get(their_kind) == kind, (message, name, their_kind)
            checked += 1
    assert checked == sum(len(f) for f in kubeproto.SCHEMA.values()) >= 40


@pytest.mark.parametrize("wrong", [("PodSpec", "initContainers", 21), ("Taint", "effect", 4)])
def test_a_wrong_number_would_be_seen(wrong: tuple[str, str, int]) -> None:
    """The check above is not vacuous: a schema with one number changed fails it."""
    message, field, number = wrong
    saved = kubeproto.SCHEMA[message]
    kubeproto.SCHEMA[message] = [(n, number if n == field else k, t) for n, k, t in saved]
    try:
        with pytest.raises(AssertionError, match=f"{message}.{field}"):
            test_every_field_read_has_kubernetes_number_and_type()
    finally:
        kubeproto.SCHEMA[message] = saved
