"""Trusted side: start the zygote, in bubblewrap where it is installed, and talk to it.

This module imports no torch, so the command line can start the zygote first and import torch
itself while the zygote does the same on the other core (`prestart`).

bubblewrap gives the zygote a root of its own: read-only binds of the system (/usr and the /lib,
/bin links), the Python runtime with its standard library, in its site-packages only the
distributions the jail imports and what they require (`jail_site_entries`: torch, numpy, msgpack
and their dependency closure; no scipy, pytest, transformers or grader), and the four jail files
in /jail; a private /proc, /dev and a size-bounded /tmp; no network, a new
PID, IPC, UTS and cgroup namespace; a new session; no environment but the few variables set here;
and it dies with the grader. The zygote keeps the capabilities it needs to build each jail
(mount, setns, setuid, kill) and every jail drops all of them before learner code runs.
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from grader.errors import ZygoteError
from grader.jail.sandbox import processes_of_uid  # noqa: F401  (doctor and tests call it here)
from grader.limits import Limits
from grader.locale import msg

JAIL_DIR = Path(__file__).resolve().parent
JAIL_FILES = ("zygote.py", "sandbox.py", "worker.py", "wire.py")
IN_JAIL = "/jail"
# packages of this project that hold hidden tests, keys, solutions, mutants or the grader itself
PRIVATE_PACKAGES = ("grader", "exercises", "mutants", "reference_model", "reports")
# the distributions the jail itself imports (zygote.py, wire.py), and the tensor libraries course
# code commonly imports (CS336-style einops and jaxtyping): learner code sees these, what they
# require to import, and the standard library; nothing else of the machine's Python. One that is
# not installed is left out (the import fails as it would on the learner's machine).
JAIL_DISTRIBUTIONS = ("torch", "numpy", "msgpack", "einops", "jaxtyping")
# where other Pythons of the machine keep packages (visible through the read-only /usr otherwise)
SYSTEM_SITE_GLOBS = (
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
)
UID_BASE = 0x40000000  # jail uids: far above any real account, one per jail
READY_TIMEOUT = 120.0
CONTROL_TIMEOUT = 60.0

WARNING = """\
WARNING: {why}
WARNING: learner code runs in a plain child process with resource limits, but WITHOUT a file system,
WARNING: network or process jail: it can read what this user can read and open network connections.
WARNING: Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and run `grader doctor`.
"""


def find_bwrap() -> str | None:
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None
    )


def requested_mode() -> str:
    mode = os.environ.get("GRADER_JAIL", "auto").strip().lower() or "auto"
    if mode not in ("auto", "bubblewrap", "process"):
        raise ZygoteError(msg("GRADER_JAIL={mode}: expected auto, bubblewrap or process", mode=repr(mode)))
    return mode


def private_paths() -> list[Path]:
    """Where the grader's own packages live: never visible in a jail, even inside site-packages."""
    paths = []
    for name in PRIVATE_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if spec.submodule_search_locations is not None:
            locations = list(spec.submodule_search_locations)
        else:
            locations = [os.path.dirname(spec.origin or "")]
        paths += [Path(loc).resolve() for loc in locations if loc]
    paths.append(JAIL_DIR.parents[1])  # the project (or install) folder itself
    return paths


def _python_roots() -> list[Path]:
    roots: list[Path] = []
    for where in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        p = Path(where).resolve()
        if p.parent == p:
            continue
        if not any(p == r or r in p.parents for r in roots):
            roots = [r for r in roots if p not in r.parents] + [p]
    return roots


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# -- what of site-packages a jail sees -------------------------------------------------------------


def canonical_name(name: str) -> str:
    """PEP 503: `typing_extensions`, `Typing-Extensions` and `typing.extensions` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(roots: Iterable[str], requires: Callable[[str], list[str] | None]) -> set[str]:
    """The canonical names of `roots` and, recursively, of everything they require unconditionally
    here (markers evaluated for this interpreter, no extras). `requires(name)` gives a
    distribution's requirement strings, or None if it is not installed (then it is left out)."""
    from packaging.requirements import InvalidRequirement, Requirement

    seen: set[str] = set()
    todo = [canonical_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        wanted = requires(name)
        if wanted is None:
            continue
        seen.add(name)
        for text in wanted:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical_name(req.name))
    return seen


def top_level_entries(record_paths: Iterable[str]) -> set[str]:
    """The names inside site-packages that a distribution's files (RECORD paths, relative to
    site-packages) occupy: a package folder, a module, its .dist-info, its .libs. Files of the
    shared __pycache__ are named one by one; paths leading out of site-packages (scripts) are
    not entries."""
    entries = set()
    for path in record_paths:
        parts = path.replace("\\", "/").split("/")  # strings, not Paths: torch alone has 15,000
        if parts[0] in ("", ".", "..") or ":" in parts[0]:
            continue
        entries.add("/".join(parts[:2]) if parts[0] == "__pycache__" and len(parts) > 1 else parts[0])
    return entries


def _record_paths(dist: importlib.metadata.Distribution) -> list[str]:
    text = dist.read_text("RECORD")
    if text is None or '"' in text:  # a quoted path (a comma or quote in a name): importlib parses it
        return [str(f) for f in dist.files or []]
    # an unquoted CSV field ends at the first comma; this is ~7x faster than dist.files for torch's
    # 15,000 rows, and it runs at every grading process's start
    return [line.split(",", 1)[0] for line in text.splitlines() if line]


def _installed(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)  # the first on sys.path, as for an import
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def jail_site_entries() -> dict[Path, tuple[str, ...]]:
    """For each site-packages folder: the entries of the jail's distributions in it."""
    dists: dict[str, importlib.metadata.Distribution | None] = {}

    def requires(name: str) -> list[str] | None:
        if name not in dists:
            dists[name] = _installed(name)
        dist = dists[name]
        return None if dist is None else dist.requires or []

    found: dict[Path, set[str]] = {}
    for name in requirement_closure(JAIL_DISTRIBUTIONS, requires):
        dist = dists[name]
        assert dist is not None  # the closure holds installed distributions only
        site = Path(str(dist.locate_file(""))).resolve()
        entries = top_level_entries(_record_paths(dist))
        meta = getattr(dist, "_path", None)  # its .dist-info, should RECORD not list itself
        if isinstance(meta, Path):
            entries.add(meta.name)
        found.setdefault(site, set()).update(e for e in entries if os.path.lexists(site / e))
    return {site: tuple(sorted(entries)) for site, entries in found.items()}


def site_folders() -> list[Path]:
    """Every site-packages folder a jail would otherwise see: this interpreter's, its base
    interpreter's and the system Pythons' under /usr."""
    folders: list[Path] = []
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for prefix in prefixes:
        paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
        folders += [Path(paths["purelib"]), Path(paths["platlib"])]
    for pattern in SYSTEM_SITE_GLOBS:
        folders += [Path(p) for p in glob.glob(pattern)]
    unique: list[Path] = []
    for folder in folders:
        real = folder.resolve()
        if real.is_dir() and real not in unique:
            unique.append(real)
    return sorted(unique)


def shown_in_site(
    path: Path, visible: list[Path], folders: list[Path], entries: dict[Path, tuple[str, ...]]
) -> bool:
    """Whether `path` is visible as far as site-packages go: outside every masked folder, or inside
    one of the entries bound into it."""
    for folder in folders:
        if _is_within(path, folder) and any(_is_within(folder, root) for root in visible):
            return any(_is_within(path, folder / name) for name in entries.get(folder, ()))
    return True


def site_argv(visible: list[Path], folders: list[Path], entries: dict[Path, tuple[str, ...]]) -> list[str]:
    """Each site-packages folder inside a visible root becomes an empty read-only tmpfs holding
    read-only binds of the jail's distributions' entries only."""
    argv: list[str] = []
    for folder in folders:
        if not any(_is_within(folder, root) for root in visible):
            continue
        argv += ["--perms", "0755", "--tmpfs", str(folder)]
        names = entries.get(folder, ())
        if any(name.startswith("__pycache__/") for name in names):
            argv += ["--perms", "0755", "--dir", str(folder / "__pycache__")]
        for name in names:
            argv += ["--ro-bind", str(folder / name), str(folder / name)]
        argv += ["--remount-ro", str(folder)]
    return argv


def bwrap_argv(bwrap: str, control_fd: int, warm: str = "full", tmp_mb: int = Limits().tmp_mb) -> list[str]:
    argv = [
        bwrap,
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    for key, value in (
        ("PATH", "/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("HOME", "/tmp"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("OMP_NUM_THREADS", "1"),
        ("MKL_NUM_THREADS", "1"),
        ("OPENBLAS_NUM_THREADS", "1"),
    ):
        argv += ["--setenv", key, value]
    if os.geteuid() == 0:
        for cap in (
            "CAP_SYS_ADMIN",
            "CAP_SETUID",
            "CAP_SETGID",
            "CAP_KILL",
            "CAP_CHOWN",
            "CAP_DAC_OVERRIDE",
            "CAP_FOWNER",
        ):
            argv += ["--cap-add", cap]
    else:
        # without root, bubblewrap needs a user namespace; the zygote keeps its capabilities there
        argv += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()), "--cap-add", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime"):
        argv += ["--ro-bind-try", etc, etc]
    # /tmp first: the Python runtime may live under /tmp (a checkout there with its .venv), and
    # its binds below must land inside this tmpfs, not be hidden by it
    argv += ["--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    roots = _python_roots()
    made = {Path("/tmp")}
    for dest in [*roots, Path(IN_JAIL)]:
        # folders bubblewrap creates on the way are 0700 (root's): a jail's uid must traverse them
        for parent in reversed([dest, *dest.parents] if dest == Path(IN_JAIL) else list(dest.parents)):
            if parent != Path("/") and parent not in made:
                made.add(parent)
                argv += ["--perms", "0755", "--dir", str(parent)]
    for root in roots:
        argv += ["--ro-bind", str(root), str(root)]
    visible, entries = [*roots, Path("/usr")], jail_site_entries()
    argv += site_argv(visible, site_folders(), entries)
    for hidden in private_paths():
        if not shown_in_site(hidden, visible, site_folders(), entries):
            continue  # in a site-packages folder, not bound into it (e.g. the grader pip-installed)
        for root in roots:
            if _is_within(hidden, root) and hidden.is_dir():
                # masked: an empty, read-only folder
                argv += ["--perms", "0755", "--tmpfs", str(hidden), "--remount-ro", str(hidden)]
                break
    for name in JAIL_FILES:
        argv += ["--ro-bind", str(JAIL_DIR / name), f"{IN_JAIL}/{name}"]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "0755",
        "--dir",
        "/submission",
        "--remount-ro",
        "/",
        "--chdir",
        "/",
    ]
    argv += [sys.executable, "-I", "-B", "-u", f"{IN_JAIL}/zygote.py", "bubblewrap", str(control_fd), warm]
    return argv


class Zygote:
    """One warm zygote process. Thread-safe; one request on its control socket at a time."""

    def __init__(self, mode: str | None = None, warm: str = "full"):
        """warm: "full" (a batch: every jail inherits torch's optimizer machinery) or "basic"
        (one submission: the zygote is ready about 1.7 s of CPU sooner)."""
        self.requested = mode or requested_mode()
        self.warm = os.environ.get("GRADER_ZYGOTE_WARM", warm)
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.info: dict | None = None
        self.warning: str | None = None
        self.isolation = "process"
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self._errors = tempfile.TemporaryFile(prefix="grader-zygote-")  # noqa: SIM115 - the zygote's stderr, for life
        bwrap = find_bwrap() if self.requested in ("auto", "bubblewrap") else None
        if self.requested == "bubblewrap" and bwrap is None:
            raise ZygoteError(
                msg(
                    "GRADER_JAIL=bubblewrap but bwrap is not installed "
                    "(Debian/Ubuntu: apt-get install bubblewrap)"
                )
            )
        if bwrap is None and self.requested == "auto":
            self.warning = "bubblewrap (bwrap) is not installed."
        elif self.requested == "process":
            self.warning = "GRADER_JAIL=process: bubblewrap is not used."
        self._start("bubblewrap" if bwrap else "process", bwrap)

    def _start(self, mode: str, bwrap: str | None):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if mode == "bubblewrap":
            assert bwrap is not None  # __init__ picks bubblewrap only when it found bwrap
            argv = bwrap_argv(bwrap, child.fileno(), self.warm)
            env = {"PATH": "/usr/bin:/bin"}
        else:
            argv = [
                sys.executable,
                "-I",
                "-B",
                "-u",
                str(JAIL_DIR / "zygote.py"),
                "process",
                str(child.fileno()),
                self.warm,
            ]
            env = {
                "PATH": "/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1",
                "HOME": tempfile.gettempdir(),
                "TMPDIR": tempfile.gettempdir(),
            }
        self._errors.seek(0)
        self._errors.truncate()
        # no preexec_fn (unsafe in a threaded parent): subprocess does the fork and exec in C
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._errors,
            pass_fds=[child.fileno()],
            env=env,
            close_fds=True,
            start_new_session=True,
            cwd="/",
        )
        child.close()
        self.sock = parent
        self.mode = mode
        self.isolation = mode

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> dict:
        """Block until the zygote has imported torch; fall back to a plain process if bwrap fails."""
        with self.lock:
            if self.info is not None:
                return self.info
            try:
                self.info = self._recv(timeout)
            except ZygoteError as exc:
                if self.mode != "bubblewrap" or self.requested == "bubblewrap":
                    raise
                why = f"bubblewrap is installed but could not start a jail ({exc})."
                self._stop()
                self._start("process", None)
                self.warning = why
                self.info = self._recv(timeout)
            if self.info.get("threads", 1) != 1:
                self.warning = (
                    (self.warning or "") + f" The zygote has {self.info['threads']} "
                    "threads; forking it is not safe."
                ).strip()
        if self.warning and self.mode == "process":
            sys.stderr.write(WARNING.format(why=self.warning))
            sys.stderr.flush()
        return self.info

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.sock is not None

    def _recv(self, timeout: float) -> dict:
        if self.sock is None:  # stopped: a start that failed, or closed
            raise ZygoteError(msg("the zygote is not running{stderr}", stderr=self._stderr()))
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 16)
        except (TimeoutError, OSError) as exc:
            self._stop()
            raise ZygoteError(
                msg("the zygote did not answer ({error}){stderr}", error=str(exc), stderr=self._stderr())
            ) from None
        if not data:
            self._stop()
            raise ZygoteError(msg("the zygote exited{stderr}", stderr=self._stderr()))
        reply = json.loads(data)
        if "error" in reply:
            raise ZygoteError(reply["error"])
        return reply["ok"]

    def _stderr(self) -> str:
        try:
            self._errors.seek(0)
            text = self._errors.read(4000).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            text = ""
        return f": {text}" if text else ""

    def call(self, message: dict, fds=(), timeout: float = CONTROL_TIMEOUT, reply: bool = True):
        """Send one request; with reply=False do not wait (the zygote sends no answer)."""
        self.wait_ready()
        with self.lock:
            if not self.alive:
                raise ZygoteError(msg("the zygote is not running{stderr}", stderr=self._stderr()))
            assert self.sock is not None  # alive
            if not reply:
                message = {**message, "reply": False}
            try:
                socket.send_fds(self.sock, [json.dumps(message).encode()], list(fds))
            except OSError as exc:
                self._stop()
                raise ZygoteError(msg("the zygote stopped answering ({error})", error=str(exc))) from None
            return self._recv(timeout) if reply else None

    def spawn(self, jail_id: int, uid: int, gid: int, limits: dict, fds, cpu: int | None = None) -> None:
        """Hand a spare jail its pipes; nobody waits for the answer. If the zygote cannot, it
        closes them: the grader then sees the jail's end of the pipe close, and `reap` says why.
        cpu: run the jail on this CPU only (the grader's own, while it waits on the jail)."""
        self.call(
            {"op": "spawn", "id": jail_id, "uid": uid, "gid": gid, "limits": limits, "cpu": cpu},
            fds,
            reply=False,
        )

    def kill(self, jail_id: int, wait: bool = True) -> dict | None:
        """SIGKILL a jail's PID 1. wait=False: the signal is sent by the zygote as it reads this
        message, before it serves anything else; nobody waits for the answer or the reaping."""
        if not wait:
            return self.call({"op": "kill", "id": jail_id, "wait": False}, reply=False)
        return self.call({"op": "kill", "id": jail_id, "wait": True})

    def signal(self, jail_id: int, signum: int) -> None:
        """Send a live jail a signal (the stack sample's); nobody waits for the answer."""
        self.call({"op": "signal", "id": jail_id, "signal": int(signum)}, reply=False)

    def collect(self) -> int:
        """Block until every killed jail has been reaped (none of its processes is left)."""
        return self.call({"op": "collect"})

    def reap(self, jail_id: int, grace: float = 1.0) -> dict | None:
        return self.call({"op": "reap", "id": jail_id, "grace": grace}, timeout=CONTROL_TIMEOUT + grace)

    def _stop(self):
        """Close the control socket (the zygote then kills its jails, cleans up and exits);
        SIGKILL it if it has not within two seconds."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()

    def close(self):
        with self.lock:
            self._stop()


_default: Zygote | None = None
_default_lock = threading.Lock()
_counter = 0


def default_zygote(wait: bool = True, warm: str = "full") -> Zygote:
    """The process's zygote, started on first use and again if it died or we were forked."""
    global _default
    with _default_lock:
        if _default is not None and (_default.owner != os.getpid() or not _default.alive):
            if _default.owner == os.getpid():
                _default.close()
            _default = None
        if _default is None:
            _default = Zygote(warm=warm)
        zygote = _default
    if wait:
        zygote.wait_ready()
    return zygote


def prestart(warm: str = "basic") -> None:
    """Start the zygote now without waiting: it imports torch while the caller does the same.
    For one `grader grade`: a basic warm-up, since the zygote serves a single submission."""
    try:
        default_zygote(wait=False, warm=warm)
    except ZygoteError:
        pass


def next_identity() -> tuple[int, int, int]:
    """(jail id, uid, gid): a uid of its own per jail when we are root, so limits and kills are per jail."""
    global _counter
    with _default_lock:
        _counter += 1
        n = _counter
    if os.geteuid() != 0:
        return n, os.getuid(), os.getgid()
    uid = UID_BASE + ((os.getpid() & 0xFFFF) << 12) + (n & 0xFFF)
    return n, uid, uid


def collect() -> None:
    """Wait until the processes of every jail this process killed are gone."""
    with _default_lock:
        zygote = _default
    if zygote is not None and zygote.owner == os.getpid() and zygote.alive:
        zygote.collect()


def shutdown() -> None:
    global _default
    with _default_lock:
        if _default is not None and _default.owner == os.getpid():
            _default.close()
        _default = None
