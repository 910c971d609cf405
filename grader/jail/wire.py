"""The jail's wire format: JSON headers plus raw tensor bytes, never pickle.

Both sides import this file: the trusted grader and the worker inside the jail. It depends on the
standard library and torch only, so the jail can run it without the rest of the grader.

A frame is: 8-byte big-endian header length, 8-byte big-endian blob length, the JSON header, the
blob. Values nest as JSON; a tensor is {"$tensor": [offset, nbytes], "dtype": ..., "shape": ...}
pointing into the blob, with its dtype from an allow-list and a size checked against its shape.
"""
import ctypes
import json
import math
import struct

import torch

MAX_FRAME_BYTES = 512 * 1024 * 1024   # the most one message may carry, header and tensors
MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 32
MAX_STRING = 64 * 1024

DTYPES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
ITEMSIZE = {k: torch.empty((), dtype=v).element_size() for k, v in DTYPES.items()}
ALIGN = 8          # each tensor's bytes start at a multiple of 8 in the blob: decoded in place


class WireError(Exception):
    """A frame that breaks the format: wrong size, unknown dtype, too deep, too large."""


class Handle:
    """An object that stays in the jail (a module, a config); only its id and type cross."""

    def __init__(self, id: int, type_name: str):
        self.id, self.type_name = id, type_name

    def __repr__(self):
        return f"<handle {self.id}: {self.type_name}>"


def encode(value, to_handle=None) -> bytes:
    """Encode a value tree. `to_handle(obj) -> Handle` stores what cannot cross (jail side only).

    A dict of str keys is a JSON object, unless a key starts with "$" (then {"$dict": pairs}), so
    that every object with a "$" key is one of the markers below and nothing else."""
    blobs: list[bytes] = []
    pos = [0, 0]            # bytes in the blob so far, tensor bytes counted against the cap

    def enc(v, depth):
        t = type(v)
        if t is str:
            return v if len(v) <= MAX_STRING else v[:MAX_STRING] + " [cut]"
        if t is float:
            return v if math.isfinite(v) else {"$float": repr(v)}
        if t is int:
            return v if -2**63 <= v < 2**63 else {"$float": _big_int(v)}
        if v is None or t is bool:
            return v
        if depth > MAX_DEPTH:
            raise WireError("value nested too deeply")
        if t is list:
            return [enc(x, depth + 1) for x in v]
        if t is dict and all(type(k) is str for k in v):
            if any(k[:1] == "$" for k in v):
                return {"$dict": [[k, enc(x, depth + 1)] for k, x in v.items()]}
            return {k: enc(x, depth + 1) for k, x in v.items()}
        if t is tuple:
            return {"$tuple": [enc(x, depth + 1) for x in v]}
        if t is Handle:
            return {"$handle": v.id, "type": v.type_name}
        if isinstance(v, (bool, str, int, float)):      # a subclass crosses as its plain value
            for base in (bool, str, int, float):
                if isinstance(v, base):
                    return enc(base(v), depth)
        tensor, is_numpy = _as_tensor(v)
        if tensor is not None:
            return enc_tensor(tensor, is_numpy)
        if isinstance(v, (list, tuple)):
            return enc(list(v) if isinstance(v, list) else tuple(v), depth)
        if to_handle is not None:
            h = to_handle(v)
            return {"$handle": h.id, "type": h.type_name}
        raise WireError(f"cannot send a {type(v).__name__}")

    def enc_tensor(tensor, is_numpy):
        if tensor.dtype not in DTYPE_NAMES:
            raise WireError(f"dtype {tensor.dtype} cannot cross the jail boundary")
        # the size is checked before the bytes exist: an expanded view of 1e9 elements is refused
        # without ever being materialised
        pos[1] += tensor.numel() * tensor.element_size()
        if pos[1] > MAX_FRAME_BYTES:
            raise WireError(f"a value of {pos[1]:,} bytes is larger than the "
                            f"{MAX_FRAME_BYTES:,} bytes one message may carry")
        raw = _tensor_bytes(tensor)
        if pos[0] % ALIGN:
            pad = ALIGN - pos[0] % ALIGN
            blobs.append(b"\0" * pad)
            pos[0] += pad
        offset = pos[0]
        blobs.append(raw)
        pos[0] += len(raw)
        return {"$tensor": [offset, len(raw)], "dtype": DTYPE_NAMES[tensor.dtype],
                "shape": list(tensor.shape), "numpy": is_numpy}

    header = _dumps(enc(value, 0)).encode()
    blob = b"".join(blobs)
    return b"".join((struct.pack(">QQ", len(header), len(blob)), header, blob))


_dumps = json.JSONEncoder(ensure_ascii=True, check_circular=False, allow_nan=False,
                          separators=(",", ":")).encode
_SCALARS = (str, int, float, bool, type(None))


def _big_int(v: int) -> str:
    try:
        return repr(float(v))
    except OverflowError:
        return "inf" if v > 0 else "-inf"


def decode_lengths(prefix: bytes) -> tuple[int, int]:
    header_len, blob_len = struct.unpack(">QQ", prefix)
    if header_len > MAX_HEADER_BYTES or header_len + blob_len > MAX_FRAME_BYTES:
        raise WireError(f"frame of {header_len + blob_len} bytes exceeds the cap")
    return header_len, blob_len


def decode(header: bytes, blob: bytes, from_handle=None):
    """Decode a value tree; tensors are rebuilt from raw bytes by this side's own torch.

    The blob is copied once into a buffer of this side's own; each tensor is a typed view of its
    bytes there (nothing in the frame is ever interpreted as code or as an object)."""
    buffer = [None]

    def own_blob():
        if buffer[0] is None:
            buffer[0] = blob if type(blob) is bytearray else bytearray(blob)
        return buffer[0]

    def dec(v, depth):
        if depth > MAX_DEPTH:
            raise WireError("value nested too deeply")
        if type(v) is list:
            return [x if type(x) in _SCALARS else dec(x, depth + 1) for x in v]
        if type(v) is not dict:
            return v
        if not any(k[:1] == "$" for k in v):
            return {k: x if type(x) in _SCALARS else dec(x, depth + 1) for k, x in v.items()}
        if "$tensor" in v:
            return _decode_tensor(v, own_blob())
        if "$tuple" in v:
            return tuple(dec(x, depth + 1) for x in _list(v["$tuple"]))
        if "$dict" in v:
            return {str(k): dec(x, depth + 1) for k, x in _list(v["$dict"])}
        if "$float" in v:
            return float(v["$float"])
        if "$handle" in v:
            h = Handle(int(v["$handle"]), str(v.get("type", "")))
            return from_handle(h) if from_handle is not None else h
        raise WireError(f"unknown value {sorted(v)[:3]}")

    return dec(json.loads(header), 0)


def _list(v):
    if type(v) is not list:
        raise WireError("a marker whose value is not a list")
    return v


def _as_tensor(v):
    if type(v) is torch.Tensor and v.device.type == "cpu":
        return v.detach(), False
    if isinstance(v, torch.Tensor):
        # a learner's Tensor subclass crosses as plain data: its methods stay behind
        return v.detach().to("cpu").as_subclass(torch.Tensor), False
    if type(v).__module__ == "numpy" and hasattr(v, "dtype") and hasattr(v, "shape"):
        import numpy as np
        arr = np.asarray(v)
        if arr.dtype.kind not in "biuf":
            return None, False
        return torch.from_numpy(np.ascontiguousarray(arr)), True
    return None, False


def _tensor_bytes(t: torch.Tensor) -> bytes:
    if t.is_neg() or t.is_conj():
        t = t.resolve_neg().resolve_conj()
    t = t.contiguous()
    n = t.numel() * t.element_size()
    if n == 0:
        return b""
    return ctypes.string_at(t.data_ptr(), n)       # the n bytes of a contiguous CPU tensor


def _decode_tensor(v: dict, blob: bytes) -> torch.Tensor:
    dtype_name = v.get("dtype")
    if dtype_name not in DTYPES:
        raise WireError(f"dtype {dtype_name!r} is not allowed")
    dtype = DTYPES[dtype_name]
    shape = [int(s) for s in v["shape"]]
    if any(s < 0 for s in shape) or len(shape) > 16:
        raise WireError(f"bad shape {shape}")
    offset, nbytes = (int(x) for x in v["$tensor"])
    itemsize = ITEMSIZE[dtype_name]
    numel = math.prod(shape)
    if nbytes != numel * itemsize or offset < 0 or offset + nbytes > len(blob):
        raise WireError(f"tensor of shape {shape} and dtype {dtype_name} does not fit {nbytes} bytes")
    if nbytes == 0:
        t = torch.empty(shape, dtype=dtype)
    elif offset % ALIGN == 0:
        t = torch.frombuffer(blob, dtype=dtype, count=numel, offset=offset).reshape(shape)
    else:                                   # not from our encoder: copy rather than misalign
        raw = bytearray(blob[offset:offset + nbytes])
        t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
    if v.get("numpy"):
        return t.numpy()
    return t
