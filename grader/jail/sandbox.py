"""Jail side: the system calls that close a jail around one submission.

Imported by the zygote (zygote.py) inside bubblewrap, or by the plain-process fallback. Standard
library and ctypes only. Everything here runs in a freshly forked child, before any learner code:

    new namespaces (mount, network, IPC, UTS; the PID namespace comes from the fork itself)
    -> private tmpfs for /tmp, /dev/shm and the submission's own files (then read-only)
    -> resource limits -> setgroups([]) -> gid -> uid -> no_new_privs -> seccomp filter
"""

import ctypes
import ctypes.util
import os
import platform
import resource
import struct

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

# The jail's own filesystems (mirrored in grader.limits.JAIL_SIDE): /dev/shm and /submission are
# small and fixed; /tmp takes Limits.tmp_mb, with room for this many files.
SHM_MB, SHM_INODES = 16, 256
SUBMISSION_MB, SUBMISSION_INODES = 16, 256
TMP_INODES = 4096

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
CLONE_NS_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWTIME
)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2


class SandboxError(Exception):
    """A step of building the jail failed: the jail must not run learner code."""


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} (errno {err})")


def unshare(flags):
    _check(libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def setns(fd, nstype):
    _check(libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source, target, fstype, flags, data=None):
    def enc(s):
        return s.encode() if isinstance(s, str) else s

    _check(
        libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)),
        f"mount {fstype or ''} on {target}",
    )


def prctl(option, arg2=0, arg3=0, arg4=0, arg5=0):
    _check(libc.prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


def sethostname(name):
    b = name.encode()
    _check(libc.sethostname(b, ctypes.c_size_t(len(b))), "sethostname")


# -- a fresh PID namespace per fork -----------------------------------------------------------------


class PidNamespaces:
    """Makes the next fork() land in a new PID namespace as its PID 1.

    unshare(CLONE_NEWPID) sets only the namespace of future children, once; setns() back to our own
    namespace re-arms it, so one long-lived zygote can give every jail its own namespace with a
    single os.fork(). Killing that PID 1 makes the kernel kill every process of the jail.
    """

    def __init__(self):
        self.own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    def arm(self):
        setns(self.own, CLONE_NEWPID)
        unshare(CLONE_NEWPID)

    def disarm(self):
        setns(self.own, CLONE_NEWPID)


# -- the jail's file system (inside bubblewrap's read-only root) -------------------------------------


def private_namespaces():
    """Run as PID 1 of a new PID namespace, as root: its own mounts, network, IPC and host name,
    and a /proc that shows only this jail's processes."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    sethostname("jail")


def _mounts_below(folder: str) -> list[str]:
    """The outermost mount points strictly inside `folder` (e.g. a venv that lives under /tmp)."""
    inside = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(folder.rstrip("/") + "/"):
                inside.append(point)
    return [p for p in inside if not any(p.startswith(q + "/") for q in inside if q != p)]


def private_mounts(tmp_bytes: int):
    """Fresh, size-bounded tmpfs for /tmp, /dev/shm and the submission's own folder.

    The Python runtime may itself live under /tmp (a checkout in /tmp with its .venv): its
    read-only binds are parked in the fresh /dev/shm, the new /tmp goes on, and they come back."""
    kib = max(tmp_bytes // 1024, 64)
    has_shm = os.path.isdir("/dev/shm")
    if has_shm:
        mount(
            "tmpfs",
            "/dev/shm",
            "tmpfs",
            MS_NOSUID | MS_NODEV | MS_NOEXEC,
            f"size={SHM_MB}m,nr_inodes={SHM_INODES},mode=1777",
        )
    kept = _mounts_below("/tmp") if has_shm else []
    parked = []
    for i, point in enumerate(kept):
        spot = f"/dev/shm/.runtime{i}"
        os.mkdir(spot, 0o700)
        mount(point, spot, None, MS_BIND | MS_REC)
        parked.append(spot)
    mount(
        "tmpfs",
        "/tmp",
        "tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size={kib}k,nr_inodes={TMP_INODES},mode=1777",
    )
    for point, spot in zip(kept, parked, strict=True):
        os.makedirs(point, 0o755, exist_ok=True)
        mount(spot, point, None, MS_BIND | MS_REC)
        mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        _check(libc.umount2(spot.encode(), MNT_DETACH), f"umount {spot}")
        os.rmdir(spot)
    mount(
        "tmpfs",
        "/submission",
        "tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size={SUBMISSION_MB}m,nr_inodes={SUBMISSION_INODES},mode=755",
    )


def resize_tmp(tmp_bytes: int):
    kib = max(tmp_bytes // 1024, 64)
    mount(
        None,
        "/tmp",
        None,
        MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size={kib}k,nr_inodes={TMP_INODES},mode=1777",
    )


def seal_submission():
    """After the files are written: the submission's own folder becomes read-only too."""
    mount(None, "/submission", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def write_files(root: str, files: dict):
    for name, data in files.items():
        if "/" in name or name in ("", ".", "..") or "\0" in name:
            raise SandboxError(f"refusing file name {name!r}")
        fd = os.open(os.path.join(root, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


# -- limits and privileges ---------------------------------------------------------------------------


def vm_size_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def apply_limits(limits: dict, set_nproc: bool):
    """RLIMIT_AS counts what is already mapped (torch's libraries): the learner gets memory_mb more."""

    def lim(which, value):
        value = int(value)
        resource.setrlimit(which, (value, value))

    cpu = max(1, int(limits["cpu_seconds"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    lim(resource.RLIMIT_AS, vm_size_bytes() + limits["memory_mb"] * 1024 * 1024)
    lim(resource.RLIMIT_FSIZE, limits["file_size_mb"] * 1024 * 1024)
    lim(resource.RLIMIT_NOFILE, limits["open_files"])
    lim(resource.RLIMIT_CORE, 0)
    lim(resource.RLIMIT_MEMLOCK, 0)
    lim(resource.RLIMIT_MSGQUEUE, 0)
    if set_nproc:
        lim(resource.RLIMIT_NPROC, limits["processes"])


def drop_privileges(uid: int, gid: int):
    """setgroups([]) first, then the gid, then the uid: after this no capability is left."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid or os.getgroups():
        raise SandboxError("could not drop privileges")
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise SandboxError("privileges came back after dropping them")


def drop_capabilities():
    """Without root (bubblewrap in a user namespace) the uid stays; every capability goes."""
    PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break  # EINVAL: past the last capability
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none
    _check(libc.capset(header, data), "capset")
    with open("/proc/self/status") as f:
        status = f.read()
    if "CapEff:\t0000000000000000" not in status:
        raise SandboxError("capabilities remain after dropping them")


def no_new_privs():
    prctl(PR_SET_NO_NEW_PRIVS, 1)


# -- a seccomp filter: system calls a learner never needs, whose only use is an attack ---------------

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
ENOSYS = 38
EPROTONOSUPPORT = 93
EAFNOSUPPORT = 97

# Each of these kills the process (SIGSYS), which the grader reports as `sandbox`.
DENIED = (
    "ptrace",
    "syslog",
    "vhangup",
    "pivot_root",
    "adjtimex",
    "chroot",
    "acct",
    "settimeofday",
    "mount",
    "umount2",
    "swapon",
    "swapoff",
    "reboot",
    "iopl",
    "ioperm",
    "init_module",
    "delete_module",
    "quotactl",
    "lookup_dcookie",
    "clock_settime",
    "kexec_load",
    "add_key",
    "request_key",
    "keyctl",
    "unshare",
    "perf_event_open",
    "name_to_handle_at",
    "open_by_handle_at",
    "clock_adjtime",
    "setns",
    "process_vm_readv",
    "process_vm_writev",
    "finit_module",
    "kexec_file_load",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
)

# System call numbers by architecture, for DENIED and the calls the filter looks into; a call an
# architecture lacks (iopl on aarch64) is absent. x86_64: arch/x86/entry/syscalls/syscall_64.tbl;
# aarch64: include/uapi/asm-generic/unistd.h.
SYSCALLS = {
    "x86_64": {
        "ptrace": 101,
        "syslog": 103,
        "vhangup": 153,
        "pivot_root": 155,
        "adjtimex": 159,
        "chroot": 161,
        "acct": 163,
        "settimeofday": 164,
        "mount": 165,
        "umount2": 166,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "iopl": 172,
        "ioperm": 173,
        "init_module": 175,
        "delete_module": 176,
        "quotactl": 179,
        "lookup_dcookie": 212,
        "clock_settime": 227,
        "kexec_load": 246,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "unshare": 272,
        "perf_event_open": 298,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "clock_adjtime": 305,
        "setns": 308,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "finit_module": 313,
        "kexec_file_load": 320,
        "bpf": 321,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "socket": 41,
        "socketpair": 53,
        "clone": 56,
        "clone3": 435,
    },
    "aarch64": {
        "lookup_dcookie": 18,
        "umount2": 39,
        "mount": 40,
        "pivot_root": 41,
        "chroot": 51,
        "vhangup": 58,
        "quotactl": 60,
        "acct": 89,
        "unshare": 97,
        "kexec_load": 104,
        "init_module": 105,
        "delete_module": 106,
        "clock_settime": 112,
        "syslog": 116,
        "ptrace": 117,
        "reboot": 142,
        "settimeofday": 170,
        "adjtimex": 171,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "swapon": 224,
        "swapoff": 225,
        "perf_event_open": 241,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "clock_adjtime": 266,
        "setns": 268,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "finit_module": 273,
        "bpf": 280,
        "userfaultfd": 282,
        "kexec_file_load": 294,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "socket": 198,
        "socketpair": 199,
        "clone": 220,
        "clone3": 435,
    },
}
# seccomp_data.arch of each: any other ABI (i386 through int 0x80, AArch32) is killed outright
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
MACHINES = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same numbers with this bit, killed too

# Socket families a jail may open: AF_UNIX (the worker's own pipes are socketpairs), AF_INET and
# AF_INET6 (namespaced: the jail's network has only its own loopback), and AF_NETLINK for
# NETLINK_ROUTE alone (glibc's if_nameindex and getaddrinfo ask it about the jail's interfaces).
# Every other family fails with EAFNOSUPPORT, an OSError learner code can handle: AF_VSOCK is not
# namespaced at all and reaches the host, and AF_PACKET, AF_ALG, AF_KEY, AF_BLUETOOTH, AF_XDP,
# the other netlink protocols ... are kernel surface no learner needs.
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
NETLINK_ROUTE = 0
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)
DENIED_FAMILIES = {  # each a doctor check (grader/jail/doctor.py): its socket() must fail in a jail
    "AF_PACKET": 17,
    "AF_VSOCK": 40,
    "AF_ALG": 38,
    "AF_KEY": 15,
    "AF_BLUETOOTH": 31,
    "AF_XDP": 44,
    "AF_TIPC": 30,
    "AF_CAN": 29,
    "AF_RDS": 21,
}
DENIED_NETLINK = {
    "NETLINK_SOCK_DIAG": 4,
    "NETLINK_AUDIT": 9,
    "NETLINK_KOBJECT_UEVENT": 15,
    "NETLINK_GENERIC": 16,
}


def filter_arch(machine: str | None = None) -> str | None:
    """The architecture whose filter this machine runs, or None: then a jail has no filter."""
    return MACHINES.get(machine or platform.machine())


def seccomp_supported(machine: str | None = None) -> bool:
    return filter_arch(machine) is not None


LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06


def _stmt(code, k):
    return struct.pack("HBBI", code, 0, 0, k)


def _jump(code, k, jt, jf):
    return struct.pack("HBBI", code, jt, jf, k)


def _bpf_program(arch: str = "x86_64") -> bytes:
    """The filter for one architecture (a key of SYSCALLS), as classic BPF over seccomp_data:
    nr at offset 0, arch at 4, args[i] from 16 + 8 i (little-endian: the low 32 bits first)."""
    nr = SYSCALLS[arch]
    prog = [
        _stmt(LD_W_ABS, 4),  # seccomp_data.arch
        _jump(JEQ, AUDIT_ARCH[arch], 1, 0),
        _stmt(RET, SECCOMP_RET_KILL_PROCESS),  # another ABI: no
        _stmt(LD_W_ABS, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":
        prog += [_jump(JGE, X32_SYSCALL_BIT, 0, 1), _stmt(RET, SECCOMP_RET_KILL_PROCESS)]
    for number in sorted(nr[name] for name in DENIED if name in nr):
        prog += [_jump(JEQ, number, 0, 1), _stmt(RET, SECCOMP_RET_KILL_PROCESS)]
    prog += [_jump(JEQ, nr["clone3"], 0, 1), _stmt(RET, SECCOMP_RET_ERRNO | ENOSYS)]
    prog += _socket_family_filter(nr["socket"], nr["socketpair"])
    prog += [
        _jump(JEQ, nr["clone"], 0, 3),  # clone: only without namespace flags
        _stmt(LD_W_ABS, 16),  # args[0], low 32 bits
        _jump(JSET, CLONE_NS_FLAGS, 0, 1),
        _stmt(RET, SECCOMP_RET_KILL_PROCESS),
        _stmt(RET, SECCOMP_RET_ALLOW),
    ]
    return b"".join(prog)


def _socket_family_filter(sys_socket: int, sys_socketpair: int) -> list:
    """socket(2) and socketpair(2) by domain (args[0], an int: its low 32 bits), and for
    AF_NETLINK by protocol (args[2]). Entered and left with the system call number loaded."""
    allow = [_stmt(RET, SECCOMP_RET_ALLOW)]
    deny_family = [_stmt(RET, SECCOMP_RET_ERRNO | EAFNOSUPPORT)]
    netlink = [  # A holds the domain; not netlink: denied
        _jump(JEQ, AF_NETLINK, 0, 4),
        _stmt(LD_W_ABS, 32),  # args[2], the protocol
        _jump(JEQ, NETLINK_ROUTE, 0, 1),
        *allow,
        _stmt(RET, SECCOMP_RET_ERRNO | EPROTONOSUPPORT),
    ]
    families = []
    for i, family in enumerate(ALLOWED_FAMILIES):
        # an allowed family jumps to the `allow` after the remaining family tests and netlink
        families.append(
            _jump(JEQ, family, len(ALLOWED_FAMILIES) - 1 - i + len(netlink) + len(deny_family), 0)
        )
    check = [_stmt(LD_W_ABS, 16), *families, *netlink, *deny_family, *allow]  # args[0], the domain
    return [_jump(JEQ, sys_socket, 1, 0), _jump(JEQ, sys_socketpair, 0, len(check)), *check]


def install_seccomp() -> bool:
    """Needs no_new_privs (set first). Returns False where the filter is not available."""
    arch = filter_arch()
    if arch is None:
        return False
    code = _bpf_program(arch)
    n = len(code) // 8
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(n, ctypes.addressof(buf))
    ret = libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0)
    _check(ret, "seccomp")
    return True


def close_fds_except(keep):
    keep = sorted(set(keep))
    low = 3
    for fd in keep:
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 16)


def processes_of_uid(uid: int) -> list[int]:
    """Every process this /proc shows running as `uid`: what a jail left behind, if anything."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
            except OSError:
                pass
    return pids
