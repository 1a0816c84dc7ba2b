"""A release's gates report what they found; the release decides: a gate that did not pass
is the use case's refusal (exit 3), with the gate's message and hint word for word."""

from __future__ import annotations

import yaml

from gpuops.core.releaseconfig import Environment, parse
from gpuops.errors import ExitCode, GateRefused
from gpuops.usecases.releases.gates import Gate, digest_gate, first_closed, image_gate

CONFIG = """\
environments:
  staging:
    namespace: ai-staging
    deployment: infer
    image: 127.0.0.1:9/ai/infer
"""
DIGEST = "sha256:" + "b" * 64


class _Registry:
    """A registry that holds one tag and one digest."""

    def resolve(self, repository: str, tag: str) -> str | None:
        return DIGEST if tag == "1.0.0" else None

    def has_digest(self, repository: str, digest: str) -> bool:
        return digest == DIGEST


def _env() -> Environment:
    return parse(yaml.safe_load(CONFIG), "gpuops-release.yaml").environment("staging")


def test_the_image_gate_says_what_it_found_and_never_raises() -> None:
    gate, digest = image_gate(_Registry(), _env(), "1.0.0")
    assert gate.ok and digest == DIGEST
    assert gate.to_dict() == {
        "gate": "image",
        "ok": True,
        "message": f"127.0.0.1:9/ai/infer:1.0.0 is {DIGEST}",
        "digest": DIGEST,
    }
    missing, none = image_gate(_Registry(), _env(), "7.7.7")
    assert none is None and not missing.ok
    assert missing.to_dict() == {
        "gate": "image",
        "ok": False,
        "message": "tag 7.7.7 does not exist in 127.0.0.1:9/ai/infer",
    }, "the hint is the refusal's, not the document's"
    refusal = missing.refusal()
    assert isinstance(refusal, GateRefused) and refusal.exit_code == ExitCode.GATE_REFUSED
    assert refusal.message == "tag 7.7.7 does not exist in 127.0.0.1:9/ai/infer"
    assert refusal.hint == "build and push it first (buildImage), or check the tag"


def test_the_digest_gate_of_a_rollback_and_the_first_closed_gate() -> None:
    kept = digest_gate(_Registry(), _env(), "1.0.0", DIGEST)
    gone = digest_gate(_Registry(), _env(), "0.9.0", "sha256:" + "c" * 64)
    assert kept.ok and not gone.ok
    assert gone.refusal().hint == "it was deleted (retention or garbage collection); rebuild it"
    assert gone.message.endswith("(0.9.0) is no longer in the registry")
    assert first_closed([kept, gone, Gate("headroom", False, "x")]) is gone
    assert first_closed([kept]) is None
