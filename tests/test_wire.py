"""The jail's wire format: raw bytes with an allow-listed dtype and a checked size, never pickle."""
import struct

import numpy as np
import pytest
import torch

from grader.jail import wire


def roundtrip(value):
    frame = wire.encode(value)
    header_len, blob_len = wire.decode_lengths(frame[:16])
    return wire.decode(frame[16:16 + header_len], frame[16 + header_len:16 + header_len + blob_len])


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


def forged(header: dict, blob: bytes = b""):
    import json
    h = json.dumps(header).encode()
    return h, blob


def test_a_tensor_whose_bytes_do_not_fit_its_shape_is_refused():
    h, b = forged({"$tensor": [0, 8], "dtype": "float32", "shape": [4]}, b"\0" * 8)
    with pytest.raises(wire.WireError):
        wire.decode(h, b)


def test_unknown_dtypes_and_markers_are_refused():
    h, b = forged({"$tensor": [0, 8], "dtype": "object", "shape": [1]}, b"\0" * 8)
    with pytest.raises(wire.WireError):
        wire.decode(h, b)
    h, b = forged({"$pickle": "gASVAAAAAAAAAAB9lC4="})
    with pytest.raises(wire.WireError):
        wire.decode(h, b)


def test_oversized_frames_are_refused_before_reading():
    with pytest.raises(wire.WireError):
        wire.decode_lengths(struct.pack(">QQ", 10, wire.MAX_FRAME_BYTES))


def test_deep_nesting_is_refused():
    value = []
    for _ in range(wire.MAX_DEPTH + 5):
        value = [value]
    with pytest.raises(wire.WireError):
        wire.encode(value)


def test_dicts_whose_keys_look_like_markers_cross_as_data():
    value = {"$tensor": [0, 4], "dtype": "float32", "shape": [1], "plain": {"a": (1, 2)}}
    assert roundtrip(value) == value
    assert roundtrip({"$dict": 1}) == {"$dict": 1}


def test_subclasses_of_plain_values_cross_as_plain_values():
    class Sneaky(int):
        def __eq__(self, other):
            return True
    back = roundtrip([Sneaky(3), 2**70, -2**70])
    assert type(back[0]) is int and back[0] == 3 and back[0] != 4
    assert back[1] == float(2**70) and back[2] == -float(2**70)
