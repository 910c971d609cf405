"""Bounded decoding: no reply costs the grader more than a small multiple of its bytes, and every
reply that breaks the protocol is the learner's failure of the check that made the call.

The forged replies (tests/adversarial/replies.py) are graded through the real grading path; the
decoder's bounds are checked on the same bodies in this process, with tracemalloc.
"""

from __future__ import annotations

import json
import struct
import tracemalloc

import msgpack
import pytest
import torch
from adversarial.replies import CASES, attack_code, body_bytes
from conftest import EXERCISES

import grader.grading.grade as grading
from grader.catalog.exercises import load_exercise
from grader.jail import wire
from grader.models import Limits

SOLUTION = EXERCISES / "day45-attention" / "solution" / "attention.py"


def decode_peak(body: bytes) -> tuple[object, int]:
    """What decoding `body` gives (the value or the WireError) and its peak of Python heap."""
    tracemalloc.start()
    try:
        try:
            value: object = wire.decode(body)
        except wire.WireError as exc:
            value = exc
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def allowed(body: bytes) -> int:
    """The decoder's promise: its own budget, plus one copy of the body (tensor payloads)."""
    return wire.DECODED_FLOOR + (wire.DECODED_PER_BYTE + 1) * len(body)


# -- the decoder, in this process --------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_forged_body_costs_a_small_multiple_of_its_bytes(case):
    body = body_bytes(case)
    value, peak = decode_peak(body)
    assert peak <= allowed(body), (case.name, peak, len(body))
    if case.name not in ("bogus-handle", "malformed-error-record", "malformed-ready-reply"):
        assert isinstance(value, wire.WireError), case.name


def passing_bodies():
    """Bodies just within the caps, of every kind of value the decoder builds: the cost model
    must not underestimate any of them."""
    yield "empty-maps", msgpack.packb([{}] * 4000)
    yield "small-maps", msgpack.packb([{i: None for i in range(n)} for n in range(12) for _ in range(150)])
    yield "empty-lists", msgpack.packb([[]] * 10000)
    yield "short-strings", msgpack.packb([f"s{i}" for i in range(12000)])
    yield "big-ints", msgpack.packb([2**40 + i for i in range(20000)])
    yield "floats", msgpack.packb([0.5 + i for i in range(100000)])
    yield "tuples", wire.encode([(i,) for i in range(3000)])[wire.PREFIX_BYTES :]
    yield "handles", wire.encode([wire.Handle(i, "GPT") for i in range(3000)])[wire.PREFIX_BYTES :]
    yield "tensors", wire.encode([torch.zeros(1) for _ in range(1500)])[wire.PREFIX_BYTES :]
    yield "one-big-tensor", wire.encode(torch.zeros(1 << 20))[wire.PREFIX_BYTES :]


@pytest.mark.parametrize("name,body", list(passing_bodies()), ids=[n for n, _ in passing_bodies()])
def test_the_cost_model_bounds_what_a_body_really_takes(name, body):
    value, peak = decode_peak(body)
    assert not isinstance(value, wire.WireError), (name, value)
    assert peak <= allowed(body), (name, peak, allowed(body))


def test_the_caps_bite_before_anything_is_built():
    many = msgpack.packb([None] * (wire.MAX_OBJECTS + 1))
    value, peak = decode_peak(many)
    assert isinstance(value, wire.WireError) and "values" in str(value)
    assert peak < len(many)  # refused by the first pass: no list of that length was made
    costly = msgpack.packb([{}] * 100_000)  # 100 KB, about 7 MB once built
    value, peak = decode_peak(costly)
    assert isinstance(value, wire.WireError) and "memory" in str(value)
    assert peak < 1 << 20


def test_nesting_is_counted_across_lists_maps_and_tuples_while_walking():
    inner = msgpack.packb([None])
    for _ in range(wire.MAX_DEPTH - 1):  # a tuple holding a map holding a list ... : 32 levels
        inner = msgpack.packb({"k": msgpack.ExtType(wire.TUPLE, b"\x91" + inner)})
    with pytest.raises(wire.WireError, match="deeply"):
        wire.decode(inner)
    ok = wire.encode([[[]]] * 3)[wire.PREFIX_BYTES :]
    assert wire.decode(ok) == [[[]]] * 3
    with pytest.raises(wire.WireError, match="deeply"):  # msgpack alone would build 1023 levels
        wire.decode(b"\x91" * 100_000 + b"\xc0")


def tensor_body(code, shape, payload=b"", numpy=0):
    head = struct.pack("<BBB", code, numpy, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return msgpack.packb(msgpack.ExtType(wire.TENSOR, head + payload))


@pytest.mark.parametrize(
    "shape,payload",
    [
        ((2**63 - 1, 2**63 - 1, 0), b""),  # raised in torch.empty before: pytest INTERNALERROR
        ((0, 2**62), b""),
        ((2**41,), b""),
        ((1 << 20, 1 << 20), b"\0" * 16),
        ((2**32, 2**32), b"\0" * 4),  # the product wraps to 0 in 64 bits: Python ints do not
        ((-1, -4), b"\0" * 16),
    ],
)
def test_shapes_that_overflow_or_do_not_fit_their_bytes_are_refused(shape, payload):
    float32 = list(wire.DTYPES).index("float32")
    with pytest.raises(wire.WireError):
        wire.decode(tensor_body(float32, shape, payload))


def test_empty_tensors_of_sane_shapes_still_cross():
    float32 = list(wire.DTYPES).index("float32")
    assert wire.decode(tensor_body(float32, (0, 1 << 20))).shape == (0, 1 << 20)
    assert wire.decode(tensor_body(float32, (3, 0, 5))).shape == (3, 0, 5)


def test_every_frame_of_a_graded_solution_fits_the_caps():
    """The largest frames the exercises need (a GPT's weights, a training corpus) pass."""
    gpt_like = {f"blocks.{i}.{n}": torch.randn(64, 256) for i in range(4) for n in ("w1", "w2", "w3")}
    assert wire.decode(wire.encode(gpt_like)[wire.PREFIX_BYTES :]).keys() == gpt_like.keys()
    corpus = torch.randint(0, 64, (20_000,))
    assert torch.equal(wire.decode(wire.encode({"data": corpus})[wire.PREFIX_BYTES :])["data"], corpus)


def test_only_wire_errors_leave_decode():
    """torch's, msgpack's and Python's own refusals are all WireError."""
    for body in (
        b"",
        b"\xc1",
        b"\xa2\xff\xfe",
        b"\x81\x90\xc0",  # a list as a map key: unhashable
        b"\xd6\xff\x00\x00\x00\x01",  # a msgpack Timestamp: no such object is made here
        b"\xc7\x03\x03\x91\x01\x02",  # a handle that says it has one item and holds two
        b"\xdd\xff\xff\xff\xff",  # 4 billion items announced, none there
    ):
        with pytest.raises(wire.WireError):
            wire.decode(body)


# -- forged replies, graded ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exercise():
    return load_exercise("day45-attention").model_copy(
        update={
            "limits": Limits(wall_seconds=60, call_seconds=10, memory_mb=1024, processes=32, file_size_mb=64)
        }
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_forged_reply_fails_the_check_that_asked_and_no_other(case, exercise, tmp_path):
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "attention.py").write_text(SOLUTION.read_text() + "\n# --- forged reply ---\n" + attack_code(case))
    grade = json.loads(grading.grade(exercise, sub).model_dump_json())
    text = json.dumps(grade)
    assert grade["passed"] is False, text[:2000]
    assert "internal grader error" not in text, text[:3000]
    failing = [c for c in grade["checks"] if not c["passed"]]
    if case.at_import:  # the ready reply: nothing can be graded
        assert grade["error"] and grade["error"]["kind"] == "crash", text[:3000]
        assert case.message in grade["error"]["message"], text[:3000]
        return
    assert grade["error"] is None, text[:3000]
    assert any(case.symptom in c["symptoms"] and case.message in c["message"] for c in failing), text[:3000]
    # a check fails for its own call only: a jail that broke the protocol is killed, and the next
    # check runs in a fresh one. (A jail that exits after a reply the grader accepted may be seen
    # to have died before the next check, or only at its first call: a crash there, by timing.)
    called = {"softmax-matches-reference", "softmax-large-logits", "softmax-all-minus-inf", "softmax-float16",
              "softmax-default-dim"}
    if not case.well_formed:
        assert {c["id"] for c in failing} <= called, [c["id"] for c in failing]
    assert all(c["symptoms"] in (["exception"], [case.symptom]) for c in failing), text[:3000]
    # the checks that never call stable_softmax directly run in fresh jails, and pass
    assert any(c["passed"] for c in grade["checks"]), text[:3000]
