"""Fuzzing wire.decode, bounded in examples and time: whatever the bytes, only a WireError leaves
it, a decoded tensor fits its bytes, and the heap it takes stays within the decoder's promise
(its budget per byte of the body, plus one copy of the body)."""

from __future__ import annotations

import math
import struct
import tracemalloc

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.jail import wire

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_within_bounds(body: bytes, measure_heap: bool = False):
    """Decode `body`: the value, or None after a WireError; any other exception fails the test."""
    if measure_heap:
        tracemalloc.start()
    try:
        try:
            value = wire.decode(body)
        except wire.WireError:
            value = None
        if measure_heap:
            peak = tracemalloc.get_traced_memory()[1]
            assert peak <= wire.DECODED_FLOOR + (wire.DECODED_PER_BYTE + 1) * len(body), (peak, len(body))
    finally:
        if measure_heap:
            tracemalloc.stop()
    check_tensors(value)
    return value


def check_tensors(value, depth=0):
    assert depth <= wire.MAX_DEPTH
    if isinstance(value, torch.Tensor):
        assert value.numel() <= wire.MAX_FRAME_BYTES
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_tensors(v, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            check_tensors(v, depth + 1)


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes(body):
    decode_within_bounds(body)


def tensors():
    return st.builds(
        lambda dtype, shape: torch.zeros(shape, dtype=dtype),
        st.sampled_from(list(wire.DTYPES.values())),
        st.lists(st.integers(0, 4), max_size=3),
    )


VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(),
        st.text(max_size=10),
        st.binary(max_size=10),
        tensors(),
        st.builds(wire.Handle, st.integers(0, 2**32), st.text(max_size=8)),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(-5, 5)), inner, max_size=4),
    ),
    max_leaves=25,
)


@FUZZ
@given(VALUES)
def test_what_encode_makes_decodes(value):
    body = wire.encode(value)[wire.PREFIX_BYTES :]
    assert decode_within_bounds(body, measure_heap=True) is not None or value is None


@FUZZ
@given(
    VALUES,
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255), st.sampled_from("fid")), max_size=6),
)
def test_mutated_frames(value, edits):
    body = bytearray(wire.encode(value)[wire.PREFIX_BYTES :])
    for where, byte, kind in edits:
        at = where % (len(body) + 1)
        if kind == "f" and at < len(body):
            body[at] = byte
        elif kind == "i":
            body.insert(at, byte)
        elif kind == "d" and at < len(body):
            del body[at]
    decode_within_bounds(bytes(body), measure_heap=True)


@FUZZ
@given(
    code=st.sampled_from([wire.TENSOR, wire.TENSOR, wire.TUPLE, wire.HANDLE, -1, 0, 4, 127]),
    dtype=st.integers(0, 255),
    numpy=st.integers(0, 3),
    shape=st.lists(
        st.one_of(st.integers(-3, 8), st.sampled_from([0, 2**31, 2**40, 2**41, 2**62, 2**63 - 1, -(2**63)])),
        max_size=18,
    ),
    declared_ndim=st.one_of(st.none(), st.integers(0, 255)),
    payload=st.binary(max_size=96),
    wrap=st.booleans(),
    fit=st.booleans(),
)
def test_extension_values_with_random_headers(code, dtype, numpy, shape, declared_ndim, payload, wrap, fit):
    ndim = len(shape) if declared_ndim is None else declared_ndim
    if fit and dtype < len(wire.DTYPES) and all(0 <= n <= 8 for n in shape):  # bytes that fit: decodes
        payload = bytes(math.prod(shape) * wire.ITEMSIZE[list(wire.DTYPES)[dtype]])
    head = struct.pack("<BBB", dtype, numpy, ndim) + struct.pack(f"<{len(shape)}q", *shape)
    data = head + payload
    ext = b"\xc9" + struct.pack(">Ib", len(data), code) + data  # ext 32: any code, -1 (timestamps) too
    body = b"\x81\xa2ok\x92" + ext + b"\x81\xa1k" + ext if wrap else ext
    value = decode_within_bounds(body, measure_heap=True)
    if code == wire.TENSOR and value is not None:
        t = torch.as_tensor(value["ok"][0] if wrap else value)
        assert t.numel() * t.element_size() == len(head) + len(payload) - 3 - 8 * ndim


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from([b"\x80", b"\x90", b"\xa1x", b"\xc0", b"\xd6\x03\x92\x01\xa1x", b"\x91\x80"]),
    st.integers(1000, 300_000),
)
def test_many_small_values_are_bounded_per_byte(item, count):
    body = b"\xdd" + struct.pack(">I", count) + item * count
    decode_within_bounds(body, measure_heap=True)
