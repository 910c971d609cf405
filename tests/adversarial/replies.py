"""Forged replies: day45-attention submissions whose jail sends the grader frames of its own making.

The learner's code can write to the jail's end of the protocol pipe (the one write-only pipe among
its file descriptors) as well as the worker can. Each case is the reference solution plus code
that, when the grader calls `stable_softmax` directly (not through the learner's own attention),
writes one forged frame there and exits, so the grader reads that frame as its reply. The other
checks keep running, in fresh jails, and the solution passes them.

`body` is a Python expression over `_struct` (the struct module) and `_N` (the case's `n`): the
jail evaluates it to make the frame's body, and the tests and the benchmark evaluate the same
text (`body_bytes`) to decode it in the grading process.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MiB = 1 << 20
OK = r'b"\x81\xa2ok"'  # {"ok": ...}: a map of one entry, key "ok"


@dataclass(frozen=True)
class ReplyCase:
    name: str
    body: str  # the expression making the forged frame's body
    n: int = 0  # _N in `body`
    announced: int | None = None  # the length the frame's prefix announces; None: the body's own
    at_import: bool = False  # forged in place of the ready reply, not a call's reply
    symptom: str = "exception"  # what the checks it fails carry
    message: str = "broke the protocol"  # text their message (or the grade's error) holds
    well_formed: bool = False  # a frame the grader accepts: the jail's exit after it is seen later
    notes: str = ""


def tensor_ext(dtype_code: int, shape: tuple, payload_expr: str = 'b""') -> str:
    """A TENSOR extension value (ext 8) of this header and payload, as an expression."""
    head = struct.pack("<BBB", dtype_code, 0, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return f"(lambda _p: b'\\xc7' + bytes([len(_p)]) + b'\\x01' + _p)({head!r} + {payload_expr})"


FLOAT32 = 2  # wire.DTYPES' order: float16, bfloat16, float32, ...

CASES = [
    ReplyCase(
        "empty-maps",
        OK + r' + b"\xdd" + _struct.pack(">I", _N) + b"\x80" * _N',
        n=32 * MiB,
        notes="32 MiB of empty maps: 5 GB and 30 s to build before the bounds",
    ),
    ReplyCase("deep-nesting", OK + r' + b"\x91" * _N + b"\xc0"', n=1 * MiB),
    ReplyCase(
        "many-tiny-strings",
        OK + r' + b"\xdd" + _struct.pack(">I", _N) + b"\xa1x" * _N',
        n=16 * MiB,
    ),
    ReplyCase(
        "many-handles",
        OK + r' + b"\xdd" + _struct.pack(">I", _N) + b"\xd6\x03\x92\x01\xa1x" * _N',
        n=1 * MiB,
    ),
    ReplyCase(
        "shape-bomb",
        OK + " + " + tensor_ext(FLOAT32, (2**63 - 1, 2**63 - 1, 0)),
        notes="an empty tensor whose other dimensions overflow: torch.empty raised in the grader",
    ),
    ReplyCase(
        "huge-shape-few-bytes",
        OK + " + " + tensor_ext(FLOAT32, (1 << 20, 1 << 20), r'b"\0" * 16'),
    ),
    ReplyCase("announced-500-mib", OK, announced=500 * MiB),
    ReplyCase("invalid-utf8", OK + r' + b"\xa2\xff\xfe"'),
    ReplyCase("bytes-after-the-value", OK + r' + b"\xc0\xc0\xc0"'),
    ReplyCase("unknown-extension", OK + r' + b"\xd4\x2a\x00"'),
    ReplyCase("timestamp-extension", OK + r' + b"\xd6\xff\x00\x00\x00\x01"'),
    ReplyCase(
        "malformed-error-record",
        r'b"\x81\xa5error\x82\xa4type\x05\xa3mro\x07"',
        notes="an error whose fields LearnerError would choke on",
    ),
    ReplyCase(
        "bogus-handle",
        OK + r' + b"\xd7\x03\x92\xce" + _struct.pack(">I", 987654321) + b"\xa1x"',
        symptom="shape-mismatch",
        message="expected a torch tensor",
        well_formed=True,
        notes="a well-formed handle the jail never made: a wrong answer, not a broken protocol",
    ),
    ReplyCase(
        "malformed-ready-reply",
        OK[:-1] + r'\x82\xa7imports\x05\xa7missing\x91\x07"',
        at_import=True,
        notes="in place of the ready reply: the submission as a whole cannot be graded",
    ),
]


def body_bytes(case: ReplyCase) -> bytes:
    """The forged body, made here as the jail makes it."""
    return eval(case.body, {"_struct": struct, "_N": case.n})  # the corpus's own text, not input


def frame_bytes(case: ReplyCase) -> bytes:
    body = body_bytes(case)
    return struct.pack(">Q", len(body) if case.announced is None else case.announced) + body


FORGE = '''
import fcntl as _fcntl, os as _os, stat as _stat, struct as _struct, sys as _sys
def _forge():
    _N = @N@
    _body = @BODY@
    _frame = _struct.pack(">Q", @ANNOUNCED@) + _body
    for _fd in range(3, 256):
        try:
            _mode = _os.fstat(_fd).st_mode
            _flags = _fcntl.fcntl(_fd, _fcntl.F_GETFL)
        except OSError:
            continue
        if _stat.S_ISFIFO(_mode) and _flags & _os.O_ACCMODE == _os.O_WRONLY:
            _view = memoryview(_frame)
            while _view:
                _view = _view[_os.write(_fd, _view):]
    _os._exit(0)
'''

AT_CALL = '''
_softmax_ok = stable_softmax
def stable_softmax(z, dim=-1):
    if _sys._getframe(1).f_globals.get("__name__") != __name__:   # the grader's own call
        _forge()
    return _softmax_ok(z, dim)
'''

AT_IMPORT = '''
_forge()
'''


def attack_code(case: ReplyCase) -> str:
    """The code appended to the reference attention.py."""
    announced = "len(_body)" if case.announced is None else str(case.announced)
    forge = FORGE.replace("@N@", str(case.n)).replace("@BODY@", case.body).replace("@ANNOUNCED@", announced)
    return forge + (AT_IMPORT if case.at_import else AT_CALL)
