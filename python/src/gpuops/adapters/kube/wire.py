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


def list_continue(head: bytes) -> str | None:
    """The continue token of a LIST answer in Kubernetes' protobuf encoding, from its first
    bytes (or all of them): the magic, the ``runtime.Unknown`` envelope whose ``raw`` (2) is
    the list, whose first field is its ``metadata`` (1), a ``ListMeta`` with ``continue``
    (3). "" when the list has none (its last page); ``None`` while ``head`` ends before the
    metadata does."""
    if len(head) < len(PROTOBUF_MAGIC):
        if PROTOBUF_MAGIC.startswith(head):
            return None
        raise Corrupt("no magic")
    if not head.startswith(PROTOBUF_MAGIC):
        raise Corrupt("no magic")
    at = len(PROTOBUF_MAGIC)
    while True:  # the envelope's fields up to raw, whose length is all we need of it
        tag = varint(head, at)
        if tag is None:
            return None
        key, start = tag
        if key == (2 << 3 | DELIMITED):
            size = varint(head, start)
            if size is None:
                return None
            break
        found = field(head, at)
        if found is None:
            return None
        at = found[3]
    length, start = size
    meta = field(head, start)
    if meta is None:
        return None
    number, kind, at, end = meta
    if number != 1 or kind != DELIMITED or end > start + length:
        raise Corrupt("the list does not start with its metadata")
    while at < end:
        found = field(head, at)
        if found is None or found[3] > end:
            raise Corrupt("a field runs past its message")
        if found[0] == 3 and found[1] == DELIMITED:
            return head[found[2] : found[3]].decode()
        at = found[3]
    return ""
