"""Protobuf's wire format, read without the protobuf library: enough to cut a LIST answer
into its fields (:mod:`.proto` decodes items with upb) and to find its continue token
(:mod:`.ahead`, which pages before the rest of gpuops, protobuf included, has loaded).

Standard library only. A buffer that cannot be protobuf raises :class:`Corrupt`.
"""

from __future__ import annotations

from gpuops.adapters.kube.paths import PROTOBUF_MAGIC

VARINT, FIXED64, DELIMITED, FIXED32 = 0, 1, 2, 5


class Corrupt(ValueError):
    """Not the wire format: a varint too long, a field number 0, a group, a field running
    past the end of its message."""


def varint(buf: bytes | bytearray, at: int) -> tuple[int, int] | None:
    """(value, end) of the varint at ``at``; ``None`` when ``buf`` ends inside it."""
    value = shift = 0
    while at < len(buf):
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise Corrupt("varint")
    return None


def field(buf: bytes | bytearray, at: int) -> tuple[int, int, int, int] | None:
    """(number, wire type, start of its value, end of its value) of the field at ``at``;
    ``None`` when ``buf`` ends before the field does (a delimited field's value, whole)."""
    tag = varint(buf, at)
    if tag is None:
        return None
    key, at = tag
    number, wire = key >> 3, key & 7
    if number == 0:
        raise Corrupt("field 0")
    if wire == DELIMITED:
        size = varint(buf, at)
        if size is None:
            return None
        length, at = size
        end = at + length
    elif wire == VARINT:
        value = varint(buf, at)
        if value is None:
            return None
        end = value[1]
    elif wire in (FIXED64, FIXED32):
        end = at + (8 if wire == FIXED64 else 4)
    else:  # groups: Kubernetes writes none
        raise Corrupt("group")
    return (number, wire, at, end) if end <= len(buf) else None


def _delimited(buf: bytes, start: int, end: int, number: int) -> tuple[int, int] | None:
    """(start, end) of the value of the first delimited field ``number`` of the message in
    ``buf[start:end]``; ``None`` if it has none."""
    at = start
    while at < end:
        found = field(buf, at)
        if found is None or found[3] > end:
            raise Corrupt("a field runs past its message")
        if found[0] == number and found[1] == DELIMITED:
            return found[2], found[3]
        at = found[3]
    return None


def list_continue(answer: bytes) -> str:
    """The continue token of a whole LIST answer in Kubernetes' protobuf encoding: the magic,
    the ``runtime.Unknown`` envelope, its ``raw`` (2) the list, whose ``metadata`` (1) is a
    ``ListMeta`` with ``continue`` (3); "" when there is none (the last page)."""
    if not answer.startswith(PROTOBUF_MAGIC):
        raise Corrupt("no magic")
    raw = _delimited(answer, len(PROTOBUF_MAGIC), len(answer), 2)
    meta = _delimited(answer, *raw, 1) if raw else None
    token = _delimited(answer, *meta, 3) if meta else None
    return answer[token[0] : token[1]].decode() if token else ""
