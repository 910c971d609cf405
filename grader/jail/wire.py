"""The jail's wire format: MessagePack with tensors as raw bytes, never pickle.

Both sides import this file: the trusted grader and the worker inside the jail. It depends on the
standard library, msgpack and torch only, so the jail can run it without the rest of the grader.

A frame is an 8-byte big-endian length and a MessagePack body. Plain values (None, bool, int,
float, str, bytes, list, dict) are MessagePack's own; everything else is an extension type whose
payload this file builds and checks:
    TENSOR  dtype (from an allow-list), a NumPy flag, the shape, then the raw bytes, whose size
            must equal the shape's; rebuilt by this side's own torch
    TUPLE   a packed list
    HANDLE  [id, type name] of an object that stays in the jail
Decoding never creates any other kind of object: a MessagePack body cannot name a class.
"""

import ctypes
import math
import struct

import msgpack
import torch

# the jail imports only this folder: these mirror grader/limits.py's JAIL_SIDE (held equal in tests)
MAX_FRAME_BYTES = 512 * 1024 * 1024  # the most one message may carry, tensors included
MAX_DEPTH = 32  # nesting of lists, tuples and dicts a decoded value may have
MAX_STRING = 64 * 1024  # exception messages and the like are cut to this

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
ITEMSIZE = {k: torch.empty((), dtype=v).element_size() for k, v in DTYPES.items()}
_CODES = list(DTYPES)  # a dtype crosses as its index here
_CODE_OF = {DTYPES[name]: i for i, name in enumerate(_CODES)}

TENSOR, TUPLE, HANDLE = 1, 2, 3
_TENSOR_HEAD = struct.Struct("<BBB")  # dtype code, is NumPy, number of dimensions
_LENGTH = struct.Struct(">Q")
_PLAIN: tuple[type, ...] = (int, float, str, bytes, list, tuple, dict)  # what a subclass crosses as
PREFIX_BYTES = _LENGTH.size


class WireError(Exception):
    """A frame that breaks the format: wrong size, unknown dtype, too deep, too large."""


class Handle:
    """An object that stays in the jail (a module, a config); only its id and type cross."""

    def __init__(self, id: int, type_name: str):
        self.id, self.type_name = id, type_name

    def __repr__(self):
        return f"<handle {self.id}: {self.type_name}>"


def encode(value, to_handle=None) -> bytes:
    """Encode a value tree as one frame. `to_handle(obj) -> Handle` keeps what cannot cross
    (jail side only); without it such a value is a WireError."""
    budget = [MAX_FRAME_BYTES]

    def default(v):
        t = type(v)
        if t is tuple:
            return msgpack.ExtType(TUPLE, pack_nested(list(v)))
        if t is Handle:
            return msgpack.ExtType(HANDLE, pack_nested([v.id, v.type_name]))
        if t is int:  # beyond 64 bits: crosses as a float
            return _big_int(v)
        for base in _PLAIN:  # a subclass crosses as its plain value
            if isinstance(v, base):
                return base(v)
        tensor, is_numpy = _as_tensor(v)
        if tensor is not None:
            return _tensor_ext(tensor, is_numpy, budget)
        if to_handle is not None:
            h = to_handle(v)
            return msgpack.ExtType(HANDLE, pack_nested([h.id, h.type_name]))
        raise WireError(f"cannot send a {type(v).__name__}")

    def pack_nested(v) -> bytes:  # a packer is not re-entrant: one of its own per extension
        return msgpack.packb(v, **options)

    options = dict(default=default, strict_types=True, use_bin_type=True, unicode_errors="surrogatepass")
    try:
        body = msgpack.packb(value, **options)
    except WireError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # msgpack's refusals
        raise WireError(f"cannot send this value: {exc}") from None
    if len(body) > MAX_FRAME_BYTES:
        raise WireError(
            f"a value of {len(body):,} bytes is larger than the "
            f"{MAX_FRAME_BYTES:,} bytes one message may carry"
        )
    return _LENGTH.pack(len(body)) + body


def frame_length(prefix: bytes) -> int:
    """The body length a frame's prefix announces, refused before reading if over the cap."""
    (length,) = _LENGTH.unpack(prefix)
    if length > MAX_FRAME_BYTES:
        raise WireError(f"frame of {length} bytes exceeds the cap")
    return length


def decode(body: bytes, from_handle=None):
    """Decode a frame's body; tensors are rebuilt from raw bytes by this side's own torch."""

    def ext_hook(code, data):
        if code == TENSOR:
            return _decode_tensor(data)
        if code == TUPLE:
            return tuple(unpack(data))
        if code == HANDLE:
            items = unpack(data)
            if not (type(items) is list and len(items) == 2 and type(items[0]) is int):
                raise WireError("a malformed handle")
            h = Handle(items[0], str(items[1]))
            return from_handle(h) if from_handle is not None else h
        raise WireError(f"unknown extension type {code}")

    def unpack(data):
        return msgpack.unpackb(
            data, ext_hook=ext_hook, strict_map_key=False, raw=False, unicode_errors="surrogatepass"
        )

    try:
        value = unpack(body)
    except WireError:
        raise
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as exc:
        raise WireError(f"a malformed frame ({type(exc).__name__}: {exc})") from None
    _check_depth(value, 0)
    return value


def _check_depth(v, depth):
    t = type(v)
    if t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise WireError("value nested too deeply")
        for x in v:
            if type(x) in _CONTAINERS:
                _check_depth(x, depth + 1)
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise WireError("value nested too deeply")
        for x in v.values():
            if type(x) in _CONTAINERS:
                _check_depth(x, depth + 1)


_CONTAINERS = (list, tuple, dict)


def _big_int(v: int) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


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


def _tensor_ext(t: torch.Tensor, is_numpy: bool, budget: list) -> msgpack.ExtType:
    code = _CODE_OF.get(t.dtype)
    if code is None:
        raise WireError(f"dtype {t.dtype} cannot cross the jail boundary")
    if t.dim() > 16:
        raise WireError(f"a tensor of {t.dim()} dimensions cannot cross the jail boundary")
    # the size is checked before the bytes exist: an expanded view of 1e9 elements is refused
    # without ever being materialised
    n = t.numel() * t.element_size()
    budget[0] -= n
    if budget[0] < 0:
        raise WireError(
            f"a value of more than {MAX_FRAME_BYTES:,} bytes is larger than one message may carry"
        )
    if t.is_neg() or t.is_conj():
        t = t.resolve_neg().resolve_conj()
    t = t.contiguous()
    head = _TENSOR_HEAD.pack(code, is_numpy, t.dim()) + struct.pack(f"<{t.dim()}q", *t.shape)
    raw = ctypes.string_at(t.data_ptr(), n) if n else b""  # the bytes of a contiguous CPU tensor
    return msgpack.ExtType(TENSOR, head + raw)


def _decode_tensor(data: bytes):
    if len(data) < _TENSOR_HEAD.size:
        raise WireError("a tensor without its header")
    code, is_numpy, ndim = _TENSOR_HEAD.unpack_from(data)
    if code >= len(_CODES) or ndim > 16:
        raise WireError(f"a tensor of unknown dtype ({code}) or too many dimensions ({ndim})")
    start = _TENSOR_HEAD.size + 8 * ndim
    if len(data) < start:
        raise WireError("a tensor whose shape is cut short")
    shape = struct.unpack_from(f"<{ndim}q", data, _TENSOR_HEAD.size)
    name = _CODES[code]
    nbytes = len(data) - start
    if any(s < 0 for s in shape) or nbytes != math.prod(shape) * ITEMSIZE[name]:
        raise WireError(f"tensor of shape {list(shape)} and dtype {name} does not fit {nbytes} bytes")
    if nbytes == 0:
        t = torch.empty(shape, dtype=DTYPES[name])
    else:  # a buffer of this side's own: the tensor owns writable memory
        t = torch.frombuffer(bytearray(memoryview(data)[start:]), dtype=DTYPES[name]).reshape(shape)
    return t.numpy() if is_numpy else t
