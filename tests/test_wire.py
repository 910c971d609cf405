"""The jail's wire format: raw bytes with an allow-listed dtype and a checked size, never pickle."""
import struct

import msgpack

import numpy as np
import pytest
import torch

from grader.jail import wire


def roundtrip(value):
    frame = wire.encode(value)
    length = wire.frame_length(frame[:wire.PREFIX_BYTES])
    assert len(frame) == wire.PREFIX_BYTES + length
    return wire.decode(frame[wire.PREFIX_BYTES:])


@pytest.mark.parametrize("dtype", list(wire.DTYPES.values()))
def test_tensors_of_every_allowed_dtype_cross_exactly(dtype):
    t = (torch.randn(3, 5) * 10).to(dtype)
    back = roundtrip({"t": t})["t"]
    assert back.dtype == dtype and torch.equal(back, t)


def test_nested_values_and_special_floats():
    value = {"a": [1, 2.5, None, True, "s"], "b": (float("inf"), float("nan")), "e": torch.empty(0, 3)}
    back = roundtrip(value)
    assert back["a"] == [1, 2.5, None, True, "s"] and back["b"][0] == float("inf")
    assert back["b"][1] != back["b"][1] and back["e"].shape == (0, 3)


def test_numpy_arrays_come_back_as_numpy():
    back = roundtrip(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert isinstance(back, np.ndarray) and back.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_non_contiguous_and_subclassed_tensors_cross_as_plain_data():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True
    t = torch.arange(12.0).view(3, 4).t().as_subclass(Liar)
    back = roundtrip(t)
    assert type(back) is torch.Tensor and torch.equal(back, torch.arange(12.0).view(3, 4).t())


def test_objects_that_are_not_data_are_refused_without_a_handle_store():
    with pytest.raises(wire.WireError):
        wire.encode(object())
    with pytest.raises(wire.WireError):
        wire.encode(torch.zeros(2, dtype=torch.complex64))


def tensor_ext(code, shape, payload, numpy=0):
    head = struct.pack("<BBB", code, numpy, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return msgpack.packb(msgpack.ExtType(wire.TENSOR, head + payload))


def test_a_tensor_whose_bytes_do_not_fit_its_shape_is_refused():
    float32 = list(wire.DTYPES).index("float32")
    assert wire.decode(tensor_ext(float32, [2], b"\0" * 8)).shape == (2,)
    for shape, payload in (([4], b"\0" * 8), ([-1], b""), ([2], b"\0" * 9)):
        with pytest.raises(wire.WireError):
            wire.decode(tensor_ext(float32, shape, payload))


def test_unknown_dtypes_and_extension_types_are_refused():
    with pytest.raises(wire.WireError):
        wire.decode(tensor_ext(200, [1], b"\0" * 8))
    with pytest.raises(wire.WireError):           # no type code means "unpickle this"
        wire.decode(msgpack.packb(msgpack.ExtType(42, b"\x80\x04\x95")))
    with pytest.raises(wire.WireError):
        wire.decode(b"\xc1")                      # not MessagePack at all


def test_oversized_frames_are_refused_before_reading():
    with pytest.raises(wire.WireError):
        wire.frame_length(struct.pack(">Q", wire.MAX_FRAME_BYTES + 1))


def test_a_huge_view_is_refused_before_it_is_materialised():
    huge = torch.zeros(1).expand(10**9)        # 4 GB if it were copied
    with pytest.raises(wire.WireError):
        wire.encode([huge])


def test_deep_nesting_is_refused():
    value = []
    for _ in range(wire.MAX_DEPTH + 5):
        value = [value]
    with pytest.raises(wire.WireError):
        roundtrip(value)
    with pytest.raises(wire.WireError):
        roundtrip(tuple_chain(wire.MAX_DEPTH + 5))
    roundtrip(tuple_chain(wire.MAX_DEPTH - 1))


def tuple_chain(n):
    value = ()
    for _ in range(n):
        value = (value,)
    return value


def test_tuples_handles_bytes_and_odd_keys_cross_as_themselves():
    value = {"$tensor": (1, (2, 3)), 7: b"raw", "h": wire.Handle(3, "GPT"), "s": "\udc80"}
    back = roundtrip(value)
    assert back["$tensor"] == (1, (2, 3)) and type(back["$tensor"][1]) is tuple
    assert back[7] == b"raw" and back["s"] == "\udc80"
    assert type(back["h"]) is wire.Handle and (back["h"].id, back["h"].type_name) == (3, "GPT")


def test_subclasses_of_plain_values_cross_as_plain_values():
    class Sneaky(int):
        def __eq__(self, other):
            return True
    back = roundtrip([Sneaky(3), 2**70, -2**70])
    assert type(back[0]) is int and back[0] == 3 and back[0] != 4
    assert back[1] == float(2**70) and back[2] == -float(2**70)
