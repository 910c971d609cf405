"""Canary attacks, run inside a jail by `grader doctor` exactly as learner code runs there.

This file is imported in the jail as if it were a submission. Each function tries one thing a
hostile submission would try and reports, as plain data, what happened; the doctor (trusted side)
decides whether the jail held. Every attack is bounded (counts, sizes, timeouts) so that it is
harmless even where no jail holds.
"""

import errno
import os
import signal
import socket
import time

_kept: list[socket.socket] = []  # sockets a stash keeps open for as long as the jail lives


def identity():
    with open("/proc/self/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "cap_eff": status.get("CapEff", "").strip(),
        "cap_prm": status.get("CapPrm", "").strip(),
        "cap_amb": status.get("CapAmb", "").strip(),
        "no_new_privs": status.get("NoNewPrivs", "").strip(),
        "seccomp": status.get("Seccomp", "").strip(),
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "env": sorted(os.environ),
        "cwd": os.getcwd(),
    }


def exists(paths):
    return {p: os.path.exists(p) for p in paths}


def read(paths):
    out: dict[str, str | None] = {}
    for p in paths:
        try:
            with open(p, "rb") as f:
                out[p] = f.read(4096).decode("utf-8", "replace")
        except OSError as exc:
            out[p] = None if exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM) else str(exc)
    return out


def find(needle, roots, skip=(), max_files=20000, max_seconds=20.0):
    """Walk the file system for files that contain `needle` (bounded in files and time)."""
    needle = needle.encode()
    hits: list[str] = []
    seen, start = 0, time.monotonic()
    skip = tuple(skip) + ("/proc", "/sys", "/dev/pts")
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
            if dirpath.startswith(skip) and dirpath not in roots:
                dirnames[:] = []
                continue
            dirnames[:] = sorted(d for d in dirnames if not os.path.join(dirpath, d).startswith(skip))
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                seen += 1
                if seen > max_files or time.monotonic() - start > max_seconds:
                    return {"hits": hits, "files": seen, "complete": False}
                try:
                    if os.path.islink(path) or not os.path.isfile(path):
                        continue
                    with open(path, "rb") as f:
                        if needle in f.read(1 << 18):
                            hits.append(path)
                except OSError:
                    pass
    return {"hits": hits, "files": seen, "complete": True}


def processes(needle):
    """Every process this jail can see, and whether any environ or cmdline holds `needle`."""
    seen, hits = [], []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        seen.append(int(name))
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{name}/{part}", "rb") as f:
                    if needle.encode() in f.read(1 << 16):
                        hits.append(f"/proc/{name}/{part}")
            except OSError:
                pass
    return {"pids": sorted(seen), "hits": hits}


def writable(roots, skip=("/proc", "/sys"), max_dirs=200_000):
    """Directories in which a new file can actually be created (every one, or complete: False)."""
    found: list[str] = []
    n = 0
    token = f".grader-doctor-{os.getpid()}-{time.monotonic_ns()}"
    for root in roots:
        for dirpath, dirnames, _ in os.walk(root, onerror=lambda e: None):
            dirnames[:] = sorted(d for d in dirnames if not os.path.join(dirpath, d).startswith(skip))
            n += 1
            if n > max_dirs:
                return {"dirs": found, "complete": False}
            path = os.path.join(dirpath, token)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError:
                continue
            os.close(fd)
            found.append(dirpath)
            try:
                os.unlink(path)
            except OSError:
                pass
    return {"dirs": found, "complete": True}


def write(paths, text):
    out = {}
    for p in paths:
        try:
            with open(p, "w") as f:
                f.write(text)
            out[p] = True
        except OSError:
            out[p] = False
    return out


def network(tcp_port, abstract_name):
    def attempt(fn):
        try:
            fn()
            return "connected"
        except Exception as exc:  # noqa: BLE001 - any failure to connect is what we hope for
            return type(exc).__name__

    def tcp(host, port):
        def go():
            with socket.create_connection((host, port), timeout=1.0):
                pass

        return go

    def udp():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(1.0)
            s.connect(("1.1.1.1", 53))
            s.send(b"\0" * 12)

    def unix():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect("\0" + abstract_name)

    return {
        "tcp-host-loopback": attempt(tcp("127.0.0.1", tcp_port)),
        "tcp-internet": attempt(tcp("1.1.1.1", 53)),
        "udp-internet": attempt(udp),
        "unix-abstract-host": attempt(unix),
        "interfaces": [name for _, name in socket.if_nameindex()],
    }


def open_sockets(attempts):
    """socket(family, type, protocol) for each named attempt: "created", or the errno's name."""
    out = {}
    for name, (family, kind, protocol) in attempts.items():
        try:
            socket.socket(family, kind, protocol).close()
            out[name] = "created"
        except OSError as exc:
            out[name] = errno.errorcode.get(exc.errno or 0, str(exc))
    return out


def listing(folders):
    """The names in each folder, or None where it cannot be listed."""
    out: dict[str, list[str] | None] = {}
    for folder in folders:
        try:
            out[folder] = sorted(os.listdir(folder))
        except OSError:
            out[folder] = None
    return out


def importable(names):
    """Which top-level modules the jail's interpreter can find."""
    import importlib.util

    return {name: importlib.util.find_spec(name) is not None for name in names}


def fork_many(n, seconds=3.0):
    """Fork up to n children that sleep; count how many the limits let through."""
    pids, error = [], None
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError as exc:
            error = type(exc).__name__
            break
        if pid == 0:
            time.sleep(seconds)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return {"forked": len(pids), "error": error}


def daemon(seconds):
    """A double-forked, setsid daemon that would outlive its parent for `seconds`."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            time.sleep(seconds)
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    return int(os.read(r, 32) or b"0")


def forbidden(name):
    """Try one privileged operation in a child; report how the child ended."""
    pid = os.fork()
    if pid == 0:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if name == "mount":
                ok = libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None) == 0
            elif name == "unshare-user":
                ok = libc.unshare(0x10000000) == 0
            elif name == "chroot":
                ok = libc.chroot(b"/tmp") == 0
            elif name == "ptrace-init":
                ok = libc.ptrace(16, 1, 0, 0) == 0  # PTRACE_ATTACH to PID 1
            elif name == "setuid-root":
                ok = libc.setuid(0) == 0
            else:
                ok = False
            os._exit(0 if ok else 1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return {0: "succeeded", 1: "refused", 2: "error"}.get(os.WEXITSTATUS(status), "error")


def allocate(mb):
    try:
        block = bytearray(mb * 1024 * 1024)
        block[::4096] = b"\1" * len(block[::4096])
        return "allocated"
    except MemoryError:
        return "MemoryError"


def stash(token, tcp_port):
    """Leave `token` wherever a later or concurrent submission might look."""
    left = []
    for path in ("/tmp/stash", "/dev/shm/stash", os.path.expanduser("~/stash")):
        try:
            with open(path, "w") as f:
                f.write(token)
            left.append(path)
        except OSError:
            pass
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0grader-stash")
        s.listen(1)
        _kept.append(s)
        left.append("@grader-stash")
    except OSError:
        pass
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", tcp_port))
        s.listen(1)
        _kept.append(s)
        left.append(f"tcp:{tcp_port}")
    except Exception:  # noqa: BLE001
        pass
    return left


def look_for_stash(token, tcp_port):
    found = [
        p
        for p, text in read(["/tmp/stash", "/dev/shm/stash", os.path.expanduser("~/stash")]).items()
        if text and token in text
    ]
    found += processes(token)["hits"]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect("\0grader-stash")
            found.append("@grader-stash")
    except OSError:
        pass
    try:
        with socket.create_connection(("127.0.0.1", tcp_port), timeout=0.5):
            found.append(f"tcp:{tcp_port}")
    except Exception:  # noqa: BLE001
        pass
    return found
