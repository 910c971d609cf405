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

Decoding reads what the jail sent, so it is bounded before anything is built: a first pass walks
the body's MessagePack structure without creating a value, counting objects, nesting and the
memory their Python objects would take, and checking every tensor's header; only a body within
the caps is then unpacked. What a frame may cost is thus a small multiple of its bytes, and
every malformed body is a WireError, whatever its bytes.
"""

import ctypes
import math
import struct

import msgpack
import torch

# the jail imports only this folder: these mirror grader/limits.py's JAIL_SIDE (held equal in tests)
# (the largest frame of grading every exercise's solution is a 271 KB request, day48-decoder)
MAX_FRAME_BYTES = 64 * 1024 * 1024  # the most one message may carry, tensors included
MAX_DEPTH = 32  # nesting of lists, tuples and dicts a decoded value may have
MAX_STRING = 64 * 1024  # exception messages and the like are cut to this
MAX_OBJECTS = 1 << 18  # values (keys, items, scalars) of one frame: the first pass's work
DECODED_FLOOR = 1 << 20  # the Python heap any frame may cost once decoded ...
DECODED_PER_BYTE = 8  # ... plus this many bytes per byte of the frame (tensor payloads apart)
MAX_DIM = 1 << 40  # one dimension of a tensor
MAX_SPAN = 1 << 48  # the product of a tensor's dimensions, zero ones counted as one

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

    __slots__ = ("id", "type_name")

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
        if isinstance(v, tuple):  # a subclass (torch.Size): packed here, as msgpack does not
            return msgpack.ExtType(TUPLE, pack_nested(list(v)))  # give `default` what it returns
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


def frame_length(prefix: bytes | bytearray) -> int:
    """The body length a frame's prefix announces, refused before reading if over the cap."""
    (length,) = _LENGTH.unpack(prefix)
    if length > MAX_FRAME_BYTES:
        raise WireError(f"frame of {length} bytes exceeds the cap")
    return length


def decode(body: bytes | bytearray, from_handle=None):
    """Decode a frame's body; tensors are rebuilt from raw bytes by this side's own torch.

    The body is measured first (`measure`): nothing is built from one beyond the caps. Any
    failure, whatever the bytes, is a WireError; only `from_handle`'s own LookupError (a handle
    the jail does not know) passes as itself."""
    measure(body)

    def ext_hook(code, data):
        if code == TENSOR:
            return _decode_tensor(data)
        if code == TUPLE:
            return tuple(unpack(data))
        if code == HANDLE:
            items = unpack(data)
            if not (
                type(items) is list and len(items) == 2 and type(items[0]) is int and type(items[1]) is str
            ):
                raise WireError("a malformed handle")
            h = Handle(items[0], items[1])
            return from_handle(h) if from_handle is not None else h
        raise WireError(f"unknown extension type {code}")

    def unpack(data):
        return msgpack.unpackb(
            data,
            ext_hook=ext_hook,
            strict_map_key=False,
            raw=False,
            unicode_errors="surrogatepass",
            timestamp=0,
        )

    try:
        return unpack(body)
    except WireError:
        raise
    except LookupError:
        if from_handle is not None:  # the jail side: a handle it does not know is the request's error
            raise
        raise WireError("a malformed frame") from None
    except Exception as exc:  # noqa: BLE001 - measured bytes that still fail are malformed all the same
        raise WireError(f"a malformed frame ({type(exc).__name__}: {str(exc)[:200]})") from None


# -- the first pass: the shape of a body, without building it ---------------------------------------
# What each kind of value costs once built, in bytes of Python heap (CPython 3.11, 64-bit, rounded
# up): its object plus its slot in the list or dict that holds it.
_SLOT, _MAP_ENTRY = 8, 48
_COST_INT, _COST_FLOAT, _COST_STR, _COST_BYTES = 40, 32, 64, 48
_COST_LIST, _COST_MAP, _COST_TUPLE = 64, 240, 48
_COST_TENSOR, _COST_HANDLE = 512, 128

# lead byte -> (size of the length that follows, kind); fixed-size forms are handled inline
_SIZED = {
    0xC4: (1, "bin"), 0xC5: (2, "bin"), 0xC6: (4, "bin"),
    0xC7: (1, "ext"), 0xC8: (2, "ext"), 0xC9: (4, "ext"),
    0xD9: (1, "str"), 0xDA: (2, "str"), 0xDB: (4, "str"),
    0xDC: (2, "array"), 0xDD: (4, "array"), 0xDE: (2, "map"), 0xDF: (4, "map"),
}  # fmt: skip
_FIXED = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


class _Tally:
    """What the bodies walked so far would cost: objects and bytes of heap, against their caps."""

    def __init__(self, frame_bytes: int):
        self.objects = 0
        self.cost = 0
        self.budget = DECODED_FLOOR + DECODED_PER_BYTE * frame_bytes

    def add(self, objects: int, cost: int) -> None:
        self.objects += objects
        self.cost += cost
        if self.objects > MAX_OBJECTS:
            raise WireError(f"a frame of more than {MAX_OBJECTS:,} values")
        if self.cost > self.budget:
            raise WireError(
                f"a frame whose values would take more than {self.budget:,} bytes of memory "
                f"({DECODED_PER_BYTE} times its size, plus {DECODED_FLOOR:,})"
            )


def measure(body: bytes | bytearray) -> None:
    """Walk a body's MessagePack structure, extension payloads included, without building any
    value: a WireError unless it is exactly one well-formed value within MAX_OBJECTS,
    MAX_DEPTH and the memory budget, whose tensors fit their headers."""
    _walk(memoryview(body), 0, _Tally(len(body)), top=True)


def _walk(data: memoryview, depth: int, tally: _Tally, top: bool = False) -> None:
    """One packed value in `data` (the whole of it), whose outermost level sits at `depth`."""
    n = len(data)
    pos = 0
    stack: list[int] = []  # items still due at each enclosing level
    due = 1
    objects = cost = 0
    while True:
        if due == 0:
            if not stack:
                break
            due = stack.pop()
            continue
        if pos >= n:
            raise WireError("a frame cut short")
        due -= 1
        objects += 1
        if objects >= 4096:  # tallied in chunks: the caps bite early, the loop stays cheap
            tally.add(objects, cost)
            objects = cost = 0
        b = data[pos]
        pos += 1
        if b <= 0x7F or b >= 0xE0:  # fixint
            cost += _SLOT
            continue
        if b <= 0x8F or 0x90 <= b <= 0x9F:  # fixmap, fixarray
            count, kind = b & 0x0F, "map" if b <= 0x8F else "array"
        elif b <= 0xBF:  # fixstr
            pos += b & 0x1F
            cost += _COST_STR + (b & 0x1F) + _SLOT
            continue
        elif b in (0xC0, 0xC2, 0xC3):  # nil, false, true: singletons
            cost += _SLOT
            continue
        elif b in _FIXED:
            pos += _FIXED[b]
            cost += (_COST_FLOAT if b in (0xCA, 0xCB) else _COST_INT) + _SLOT
            continue
        elif b in _FIXEXT or _SIZED.get(b, (0, ""))[1] == "ext":
            if b in _FIXEXT:
                size = _FIXEXT[b]
            else:
                width = _SIZED[b][0]
                size = int.from_bytes(data[pos : pos + width], "big")
                pos += width
            if pos + 1 + size > n:
                raise WireError("an extension value cut short")
            code = int.from_bytes(data[pos : pos + 1], "big", signed=True)
            payload = data[pos + 1 : pos + 1 + size]
            pos += 1 + size
            tally.add(objects, cost)
            objects = cost = 0
            _walk_ext(code, payload, depth + len(stack), tally)
            continue
        elif b in _SIZED:
            width, kind = _SIZED[b]
            if pos + width > n:
                raise WireError("a frame cut short")
            count = int.from_bytes(data[pos : pos + width], "big")
            pos += width
            if kind in ("str", "bin"):
                pos += count
                cost += (_COST_STR if kind == "str" else _COST_BYTES) + count + _SLOT
                continue
        else:  # 0xC1: never used
            raise WireError(f"a frame with the invalid byte 0x{b:02x}")
        # a map or an array of `count` entries
        if depth + len(stack) >= MAX_DEPTH:
            raise WireError("value nested too deeply")
        items = 2 * count if kind == "map" else count
        if items > n - pos:  # every item takes at least a byte
            raise WireError(f"a {kind} of {count:,} entries in a frame of {n:,} bytes")
        cost += (_COST_MAP + _MAP_ENTRY * count if kind == "map" else _COST_LIST + _SLOT * count) + _SLOT
        if items:
            stack.append(due)
            due = items
    tally.add(objects, cost)
    if pos != n:
        raise WireError("a frame cut short" if pos > n else "bytes after a frame's value")


def _walk_ext(code: int, payload: memoryview, depth: int, tally: _Tally) -> None:
    if code == TENSOR:
        _tensor_header(payload)  # checked now; its bytes are copied once, within the frame's own
        tally.add(1, _COST_TENSOR + _SLOT)
    elif code in (TUPLE, HANDLE):
        if depth >= MAX_DEPTH:
            raise WireError("value nested too deeply")
        if not payload or not (0x90 <= payload[0] <= 0x9F or payload[0] in (0xDC, 0xDD)):
            raise WireError("a tuple or handle that is not a packed list")
        tally.add(0, _COST_TUPLE if code == TUPLE else _COST_HANDLE)
        _walk(payload, depth, tally)
    else:
        raise WireError(f"unknown extension type {code}")


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
        try:
            return v.detach().to("cpu").as_subclass(torch.Tensor), False
        except Exception:  # noqa: BLE001 - a tensor without data (device "meta"), or one that will not copy
            raise WireError(
                f"a tensor on device {str(v.device)[:40]!r} cannot be copied to the CPU"
            ) from None
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


def _tensor_header(data) -> tuple[str, tuple[int, ...], int]:
    """A tensor payload's dtype name, shape and byte count, checked against each other."""
    if len(data) < _TENSOR_HEAD.size:
        raise WireError("a tensor without its header")
    code, is_numpy, ndim = _TENSOR_HEAD.unpack_from(data)
    if code >= len(_CODES) or ndim > 16 or is_numpy > 1:
        raise WireError(f"a tensor of unknown dtype ({code}) or too many dimensions ({ndim})")
    start = _TENSOR_HEAD.size + 8 * ndim
    if len(data) < start:
        raise WireError("a tensor whose shape is cut short")
    shape = struct.unpack_from(f"<{ndim}q", data, _TENSOR_HEAD.size)
    name = _CODES[code]
    nbytes = len(data) - start
    # Python ints: no product overflows; a dimension of zero does not excuse huge other ones
    if any(s < 0 or s > MAX_DIM for s in shape) or math.prod(max(s, 1) for s in shape) > MAX_SPAN:
        raise WireError(f"a tensor of shape {list(shape)}, larger than any tensor can be")
    if nbytes != math.prod(shape) * ITEMSIZE[name]:
        raise WireError(f"tensor of shape {list(shape)} and dtype {name} does not fit {nbytes} bytes")
    return name, shape, nbytes


def _decode_tensor(data: bytes):
    name, shape, nbytes = _tensor_header(data)
    is_numpy = data[1]
    if nbytes == 0:
        t = torch.empty(shape, dtype=DTYPES[name])
    else:  # a buffer of this side's own: the tensor owns writable memory
        start = len(data) - nbytes
        t = torch.frombuffer(bytearray(memoryview(data)[start:]), dtype=DTYPES[name]).reshape(shape)
    return t.numpy() if is_numpy else t
