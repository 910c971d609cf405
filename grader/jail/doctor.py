"""`grader doctor`: run canary attacks in a real jail and refuse to grade if any of them succeeds.

The attacks (grader/jail/probe.py) run in the jail exactly as learner code does: the doctor copies
them into a submission folder, starts jails from the same zygote that grades, and judges what came
back on the trusted side. It plants its own canaries first: a file outside the jail, a process
whose environment and command line hold a secret, a TCP listener and an abstract socket on the host.

`grader grade` runs the quick subset once per jail build (the jail's files, bubblewrap, the kernel,
the uid) and caches the verdict; a failed check makes grading refuse to start.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import JailUnsound
from grader.jail import launcher, sandbox
from grader.jail.client import Jail, JailError, LearnerError, Limits

PROBE = Path(launcher.JAIL_DIR) / "probe.py"
CACHE_TTL = 24 * 3600
ALLOWED_ENV = {
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "USER",
    "LOGNAME",
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "PYTHONDONTWRITEBYTECODE",
}
JAIL_WRITABLE = ("/tmp", "/dev/shm")
# packages of the machine's Python that learner code has no need of: none may be importable
NOT_NEEDED = ("scipy", "pytest", "_pytest", "transformers", "pydantic", "hypothesis", "grader", "exercises")
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
# the socket type each denied family is tried with (one it would accept, were it not denied)
DENIED_FAMILY_TYPES = {"AF_VSOCK": SOCK_STREAM, "AF_ALG": SOCK_SEQPACKET, "AF_RDS": SOCK_SEQPACKET}


@dataclass
class Finding:
    attack: str
    contained: bool
    detail: str = ""


@dataclass
class Report:
    isolation: str
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.findings) and all(f.contained for f in self.findings)

    def add(self, attack: str, contained: bool, detail: str = "") -> None:
        self.findings.append(Finding(attack, bool(contained), detail))

    def render(self) -> str:
        lines = [f"jail: {self.isolation}"]
        for f in self.findings:
            lines.append(
                f"  {'ok     ' if f.contained else 'ESCAPED'}  {f.attack}"
                + (f": {f.detail}" if f.detail else "")
            )
        verdict = (
            "every canary attack was contained"
            if self.ok
            else "REFUSING TO GRADE: at least one canary attack succeeded"
        )
        lines.append(f"{verdict} ({self.seconds:.1f} s)")
        return "\n".join(lines) + "\n"


class Canaries:
    """Secrets planted on the host, outside any jail, for the attacks to look for."""

    def __init__(self):
        self.token = "GRADER-CANARY-" + secrets.token_hex(12)
        self.dir = Path(tempfile.mkdtemp(prefix="grader-doctor-"))
        os.chmod(self.dir, 0o755)  # readable by anyone: only the jail can hide it
        self.file = self.dir / "key.toml"
        self.file.write_text(f'secret = "{self.token}"\n')
        os.chmod(self.file, 0o644)
        self.helper = subprocess.Popen(
            [sys.executable, "-c", f"import time; time.sleep(300)  # {self.token}"],
            env={"GRADER_DOCTOR_CANARY": self.token, "PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.port = self.tcp.getsockname()[1]
        self.abstract = "grader-doctor-" + secrets.token_hex(6)
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract)
        self.unix.listen(8)

    def close(self):
        self.helper.kill()
        self.helper.wait()
        self.tcp.close()
        self.unix.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def private_paths() -> list[str]:
    from exercises import EXERCISES_DIR

    root = launcher.JAIL_DIR.parents[1]
    # the project folder itself may appear, empty, when the virtual environment lives inside it
    paths = [
        str(EXERCISES_DIR),
        str(root / "grader"),
        str(root / "mutants"),
        str(root / "reference_model"),
        str(launcher.JAIL_DIR),
        str(root / "pyproject.toml"),
        str(root / "tests"),
        str(root / "reports"),
    ]
    hidden = sorted(Path(EXERCISES_DIR).glob("*/hidden/*.py"))
    paths += [str(p) for p in hidden[:3]]
    return paths


def _site_packages() -> list[str]:
    import sysconfig

    return sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


class _ProbeJail:
    def __init__(self, zygote, limits: Limits, workdir: Path, name: str):
        root = workdir / name
        root.mkdir()
        shutil.copyfile(PROBE, root / "probe.py")
        self.jail = Jail(root, limits, zygote=zygote)
        errors = self.jail.request("import", 30, modules=["probe"])
        if errors.get("probe"):
            raise RuntimeError(f"the probe could not be imported in the jail: {errors['probe']}")

    def __call__(self, fn: str, *args, timeout: float = 60):
        return self.jail.request("call", timeout, target={"module": "probe", "path": [fn]}, args=list(args))

    def close(self):
        self.jail.close()


def run(quick: bool = False, zygote=None) -> Report:
    started = time.monotonic()
    zygote = zygote or launcher.default_zygote()
    report = Report(isolation=zygote.isolation)
    canaries = Canaries()
    workdir = Path(tempfile.mkdtemp(prefix="grader-doctor-sub-"))
    limits = Limits(wall_seconds=120, call_seconds=60, memory_mb=512, processes=16)
    jails: list[_ProbeJail] = []
    try:
        probe = _ProbeJail(zygote, limits, workdir, "a")
        jails.append(probe)
        _identity(report, probe, zygote)
        seen = probe("exists", private_paths())
        shown = [p for p, there in seen.items() if there]
        report.add(
            "hidden tests, keys, solutions, mutants and the grader are invisible",
            not shown,
            f"visible: {', '.join(shown)}" if shown else "",
        )
        got = probe("read", [str(canaries.file)])
        report.add("read a canary file planted outside the jail", got[str(canaries.file)] is None)
        targets = [os.path.join(sp, "grader-doctor-injected.pth") for sp in _site_packages()]
        targets += [
            "/jail/wire.py",
            "/submission/probe.py",
            str(canaries.dir / "written-by-jail"),
            "/etc/grader-doctor",
        ]
        wrote = probe("write", targets, "import sys  # " + canaries.token)
        leaked = [p for p, ok in wrote.items() if ok]
        leaked += [
            t for t in targets if os.path.exists(t) and t.endswith(("injected.pth", "written-by-jail"))
        ]
        report.add(
            "write into site-packages (.pth), the jail's code, the submission or the host",
            not leaked,
            f"written: {', '.join(sorted(set(leaked)))}" if leaked else "",
        )
        net = probe("network", canaries.port, canaries.abstract)
        connected = [k for k, v in net.items() if v == "connected"]
        ifaces = [i for i in net["interfaces"] if i != "lo"]
        report.add(
            "network: connect to the host's loopback, the internet, a host unix socket",
            not connected and not ifaces,
            f"connected: {connected}, interfaces: {net['interfaces']}" if connected or ifaces else "",
        )
        _socket_families(report, probe)
        _site_packages_shown(report, probe)
        if not quick:
            _full(report, probe, canaries, zygote, limits, workdir, jails)
    except (JailError, LearnerError, RuntimeError, launcher.ZygoteError) as exc:
        report.add("run the canary attacks in a jail", False, f"{type(exc).__name__}: {exc}")
    finally:
        for j in jails:
            j.close()
        canaries.close()
        shutil.rmtree(workdir, ignore_errors=True)
    report.seconds = time.monotonic() - started
    return report


def _identity(report: Report, probe, zygote) -> None:
    me = probe("identity")
    root = os.geteuid() == 0
    unprivileged = me["uid"] != 0 and me["euid"] != 0 and (not root or me["uid"] >= launcher.UID_BASE)
    no_caps = me["cap_eff"].strip("0") == "" and me["cap_prm"].strip("0") == ""
    report.add(
        "runs as an unprivileged uid of its own, with no capabilities and no_new_privs",
        unprivileged and no_caps and me["no_new_privs"] == "1" and not me["groups"],
        f"uid {me['uid']}, CapEff {me['cap_eff']}, NoNewPrivs {me['no_new_privs']}, groups {me['groups']}",
    )
    report.add("a seccomp filter is installed", *seccomp_verdict(platform.machine(), me["seccomp"]))
    extra = sorted(set(me["env"]) - ALLOWED_ENV)
    report.add("the environment is scrubbed", not extra, f"unexpected: {extra}" if extra else "")


def seccomp_verdict(machine: str, status: str) -> tuple[bool, str]:
    """Whether the jail runs under the filter: on an architecture sandbox.py has no system call
    numbers for, it does not, and the jail is not the one SPEC describes: a failure, not a skip."""
    if not sandbox.seccomp_supported(machine):
        known = ", ".join(sorted(sandbox.SYSCALLS))
        return False, f"no seccomp filter for this architecture ({machine}); there are for {known} only"
    return status == "2", f"Seccomp: {status}"


def socket_attempts() -> dict[str, tuple[int, int, int]]:
    """Every socket the filter denies, as (family, type, protocol), with the errno it must give."""
    attempts = {
        name: (family, DENIED_FAMILY_TYPES.get(name, SOCK_RAW), 0)
        for name, family in sandbox.DENIED_FAMILIES.items()
    }
    attempts |= {
        f"AF_NETLINK/{name}": (sandbox.AF_NETLINK, SOCK_RAW, protocol)
        for name, protocol in sandbox.DENIED_NETLINK.items()
    }
    return attempts


def _socket_families(report: Report, probe) -> None:
    got = probe("open_sockets", socket_attempts())
    for name, how in got.items():
        due = "EPROTONOSUPPORT" if name.startswith("AF_NETLINK/") else "EAFNOSUPPORT"
        report.add(f"open an {name} socket (the filter answers {due})", how == due, how)
    usable = {
        "AF_UNIX": (sandbox.AF_UNIX, SOCK_STREAM, 0),
        "AF_INET": (sandbox.AF_INET, SOCK_DGRAM, 0),
        "AF_NETLINK/NETLINK_ROUTE": (sandbox.AF_NETLINK, SOCK_RAW, sandbox.NETLINK_ROUTE),
    }
    opened = probe("open_sockets", usable)
    failed = {name: how for name, how in opened.items() if how != "created"}
    report.add(
        "the sockets learner code may use still open (AF_UNIX, AF_INET, NETLINK_ROUTE)",
        not failed,
        f"refused: {failed}" if failed else "",
    )


def _site_packages_shown(report: Report, probe) -> None:
    """Learner code sees the standard library and the jail's distributions, nothing else."""
    allowed = {
        str(folder): {entry.split("/")[0] for entry in entries}
        for folder, entries in launcher.jail_site_entries().items()
    }
    folders = [str(f) for f in launcher.site_folders()]
    shown = probe("listing", folders)
    extra = {
        folder: sorted(set(names) - allowed.get(folder, set())) for folder, names in shown.items() if names
    }
    extra = {folder: names for folder, names in extra.items() if names}
    count = sum(len(names or []) for names in shown.values())
    report.add(
        "site-packages shows only torch, numpy, msgpack and what they require",
        not extra,
        f"also visible: {extra}"[:500] if extra else f"{count} entries visible",
    )
    found = [name for name, there in probe("importable", list(NOT_NEEDED)).items() if there]
    report.add(
        "import packages learner code has no need of (scipy, pytest, transformers, the grader)",
        not found,
        f"importable: {found}" if found else "",
    )


def _full(report: Report, probe, canaries: Canaries, zygote, limits, workdir, jails) -> None:
    # the canary string anywhere in the jail's file system (the runtime's own folders aside)
    skip = [str(p) for p in launcher._python_roots()] + ["/usr"]
    found = probe("find", canaries.token, ["/"], skip, timeout=60)
    # a search cut short by its bounds proves nothing: it fails rather than passing on what it saw
    report.add(
        "search the whole file system for the planted canary",
        not found["hits"] and found["complete"],
        f"found in {found['hits']}"
        if found["hits"]
        else f"{found['files']} files searched" + ("" if found["complete"] else ", then cut short"),
    )
    procs = probe("processes", canaries.token)
    report.add(
        "read other processes' /proc/*/environ and cmdline (the grader's, a planted one)",
        not procs["hits"],
        f"found in {procs['hits']}" if procs["hits"] else f"sees PIDs {procs['pids'][:8]}",
    )
    space = probe("writable", ["/"], timeout=60)
    outside = [d for d in space["dirs"] if not d.startswith(JAIL_WRITABLE)]
    report.add(
        "find any writable folder besides the jail's private /tmp and /dev/shm",
        not outside and space["complete"],
        f"writable: {outside[:6]}" if outside else ("" if space["complete"] else "the walk was cut short"),
    )
    forks = probe("fork_many", limits.processes * 3)
    report.add(
        f"fork beyond the process limit ({limits.processes})",
        forks["forked"] < limits.processes,
        f"forked {forks['forked']} ({forks['error']})",
    )
    memory = probe("allocate", limits.memory_mb + 256)
    report.add(
        f"allocate more than the memory limit ({limits.memory_mb} MiB)", memory == "MemoryError", memory
    )
    for op in ("mount", "unshare-user", "chroot", "ptrace-init", "setuid-root"):
        how = probe("forbidden", op)
        report.add(f"privileged operation: {op}", how != "succeeded", how)
    # jails of other submissions: one stashes a token, a concurrent and a later one look for it
    token = "GRADER-SIBLING-" + secrets.token_hex(8)
    left = probe("stash", token, 47_474)
    other = _ProbeJail(zygote, limits, workdir, "b")
    jails.append(other)
    found = other("look_for_stash", token, 47_474)
    report.add(
        "a concurrent submission finds another's files, sockets or processes",
        not found,
        f"found {found} (stashed in {left})" if found else "",
    )
    daemon = probe("daemon", 60)
    uid = probe.jail.uid
    probe.close()
    later = _ProbeJail(zygote, limits, workdir, "c")
    jails.append(later)
    found = later("look_for_stash", token, 47_474)
    report.add(
        "a later submission finds what an earlier one left behind",
        not found,
        f"found {found}" if found else "",
    )
    zygote.collect()  # the killed jail's processes are reaped
    if os.geteuid() == 0:
        left_over = launcher.processes_of_uid(uid)
        report.add(
            "a double-forked daemon outlives its jail",
            not left_over,
            f"PIDs {left_over} still run as uid {uid}" if left_over else f"daemon {daemon} gone",
        )


# -- the cached quick check `grader grade` runs -----------------------------------------------------

_keys: dict[str, str] = {}


def _cache_key(zygote) -> str:
    if zygote.isolation in _keys:
        return _keys[zygote.isolation]
    h = hashlib.sha256()
    for name in (*launcher.JAIL_FILES, "probe.py", "launcher.py"):
        h.update((launcher.JAIL_DIR / name).read_bytes())
    h.update(
        f"{zygote.isolation}|{launcher.find_bwrap()}|{platform.release()}|{os.geteuid()}|"
        f"{sys.prefix}".encode()
    )
    _keys[zygote.isolation] = h.hexdigest()[:24]
    return _keys[zygote.isolation]


def _cache_dir() -> Path:
    base = os.environ.get("GRADER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpt-bughunt-grader"
    )
    return Path(base)


_checked: dict[str, bool] = {}


def ensure_sound(zygote=None) -> None:
    """Run the quick check once per jail build (cached on disk); raise JailUnsound if it fails.

    Only a bubblewrap jail is checked: the plain-process fallback is known not to hold these
    attacks and says so loudly when it starts."""
    try:
        zygote = zygote or launcher.default_zygote()
    except launcher.ZygoteError:
        return  # no jail at all: each grade reports it as a `sandbox` error
    if zygote.isolation != "bubblewrap" or os.environ.get("GRADER_DOCTOR") == "off":
        return
    key = _cache_key(zygote)
    if _checked.get(key):
        return
    path = _cache_dir() / f"doctor-{key}.json"
    try:
        cached = json.loads(path.read_text())
        if cached.get("ok") and time.time() - cached.get("time", 0) < CACHE_TTL:
            _checked[key] = True
            return
    except (OSError, ValueError):
        pass
    report = run(quick=True, zygote=zygote)
    if not report.ok:
        raise JailUnsound(
            "the jail failed its self-check, so grading will not start; run "
            "`grader doctor` for details:\n" + report.render()
        )
    _checked[key] = True
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"ok": True, "time": time.time(), "findings": [f.__dict__ for f in report.findings]})
        )
        os.replace(tmp, path)
    except OSError:
        pass
