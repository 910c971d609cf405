"""The jail itself: what a jail is, how it ends, the fallback, and the doctor's verdict."""
from __future__ import annotations

import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXERCISES, ROOT

from grader.jail import doctor
from grader.jail import launcher, sandbox
from grader.jail.client import Jail, JailError, JailTimeout, LearnerError, Limits
from grader.grading.session import SubmissionSession

PROBE = ROOT / "grader" / "jail" / "probe.py"


@pytest.fixture(scope="module")
def zygote():
    return launcher.default_zygote()


def bubblewrap(zygote):
    if zygote.isolation != "bubblewrap":
        pytest.skip("bubblewrap is not installed here; the process fallback is tested separately")


def probe_jail(tmp_path, zygote, **limits) -> Jail:
    root = tmp_path / "probe"
    root.mkdir()
    shutil.copyfile(PROBE, root / "probe.py")
    jail = Jail(root, Limits(**{"wall_seconds": 30, "call_seconds": 10, **limits}), zygote=zygote)
    assert jail.request("import", 10, modules=["probe"]) == {"probe": None}
    return jail


def call(jail, fn, *args, timeout=10):
    return jail.request("call", timeout, target={"module": "probe", "path": [fn]}, args=list(args))


def test_a_jail_is_unprivileged_alone_and_filtered(tmp_path, zygote):
    bubblewrap(zygote)
    jail = probe_jail(tmp_path, zygote)
    try:
        me = call(jail, "identity")
        assert me["pid"] == 1                           # PID 1 of a namespace of its own
        assert me["cap_eff"].strip("0") == "" and me["no_new_privs"] == "1"
        assert me["seccomp"] == ("2" if sandbox.seccomp_supported() else "0")
        if os.geteuid() == 0:
            assert me["uid"] >= launcher.UID_BASE and me["groups"] == []
        assert me["cwd"] == "/submission" and me["hostname"] == "jail"
        seen = call(jail, "exists", [str(ROOT), str(EXERCISES), str(ROOT / "grader"), "/sys/kernel"])
        assert seen[str(EXERCISES)] is False and seen[str(ROOT / "grader")] is False
        assert call(jail, "processes", "nothing")["pids"] == [1]
        assert call(jail, "write", ["/submission/probe.py", "/jail/zygote.py"], "x") == {
            "/submission/probe.py": False, "/jail/zygote.py": False}
    finally:
        jail.close()


def test_killing_a_jail_kills_every_process_in_it(tmp_path, zygote):
    jail = probe_jail(tmp_path, zygote)
    call(jail, "daemon", 60)                       # double-forked, setsid: outlives its parent
    uid = jail.uid
    jail.close()
    launcher.collect()
    if os.geteuid() == 0:
        assert launcher.processes_of_uid(uid) == []


def test_a_call_past_its_deadline_is_killed_promptly(tmp_path, zygote):
    root = tmp_path / "sub"
    root.mkdir()
    (root / "slow.py").write_text("import time\ndef nap(s):\n    time.sleep(s)\n    return s\n")
    jail = Jail(root, Limits(), zygote=zygote)
    jail.request("import", 10, modules=["slow"])
    t = time.monotonic()
    with pytest.raises(JailTimeout):
        jail.request("call", 1.0, target={"module": "slow", "path": ["nap"]}, args=[30])
    assert time.monotonic() - t < 5
    assert not jail.alive
    jail.close()


def test_a_learner_exception_leaves_the_jail_serving(tmp_path, zygote):
    root = tmp_path / "sub"
    root.mkdir()
    (root / "m.py").write_text("def boom():\n    raise SystemExit(3)\ndef ok():\n    return 7\n")
    jail = Jail(root, Limits(), zygote=zygote)
    jail.request("import", 10, modules=["m"])
    with pytest.raises(LearnerError) as err:
        jail.request("call", 5, target={"module": "m", "path": ["boom"]})
    assert err.value.is_a("SystemExit")
    assert jail.request("call", 5, target={"module": "m", "path": ["ok"]}) == 7
    jail.close()


def test_a_dead_jail_is_replaced_and_earlier_checks_stand(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    text = (EXERCISES / "day45-attention" / "solution" / "attention.py").read_text()
    (sub / "attention.py").write_text(text + "\nimport os as _os\n"
                                      "def split_heads(x, n_head):\n    _os._exit(9)\n")
    from grader.grading.grade import grade
    g = grade("day45-attention", sub)
    by_id = {c.id: c for c in g.checks}
    assert g.passed is False and g.error is None and g.isolation in ("bubblewrap", "process")
    assert by_id["softmax-matches-reference"].passed                    # before the crash
    assert by_id["mha-parameter-count"].passed                          # after it, in a fresh jail
    crashed = by_id["split-and-merge-heads"]
    assert not crashed.passed and "exception" in crashed.symptoms and "code 9" in crashed.message


def test_output_is_kept_across_jails_and_capped(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.py").write_text("print('hello from the jail')\nimport sys\nsys.stdout.write('x' * 5000)\n"
                              "sys.stderr.write('é the end')\n")
    session = SubmissionSession(sub, ["m"], Limits(output_bytes=1000))
    try:
        session.ensure_jail()
        out = session.output()
        assert out.start.startswith("hello from the jail") and len(out.start.encode()) == 500
        assert out.end.endswith("x" * 100 + "é the end") and len(out.end.encode()) == 500
        total = len("hello from the jail\n") + 5000 + len("é the end".encode())
        assert out.cut_bytes == total - 1000
    finally:
        session.close()


def test_what_is_printed_reaches_the_file_when_the_jail_dies_unflushed(tmp_path):
    """stdout and stderr share the file (fds 1 and 2), unbuffered: a print the learner never
    flushed is kept through os._exit in a call and at import."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.py").write_text("import os, sys\n"
                              "print('out at import', end='')\nsys.stderr.write('err at import')\n"
                              "def die():\n    print('out in call', end='')\n"
                              "    sys.stderr.write('err in call')\n"
                              "    os._exit(5)\n")
    session = SubmissionSession(sub, ["m"], Limits())
    try:
        session.ensure_jail()
        with pytest.raises(JailError):
            session.m.die()
        printed = session.output().start
        assert printed == "out at importerr at importout in callerr in call", printed
    finally:
        session.close()
    (sub / "m.py").write_text("import os, sys\nprint('bye', end='')\nsys.stderr.write(' now')\nos._exit(3)\n")
    session = SubmissionSession(sub, ["m"], Limits())
    try:
        with pytest.raises(JailError):
            session.ensure_jail()
        assert session.output().start == "bye now"
    finally:
        session.close()


def test_the_quick_check_is_cached_and_refuses_an_unsound_jail(tmp_path, monkeypatch, zygote):
    monkeypatch.setenv("GRADER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(doctor, "_checked", {})
    if zygote.isolation != "bubblewrap":
        doctor.ensure_sound(zygote)                      # the fallback is not checked, only warned
        return
    doctor.ensure_sound(zygote)
    assert len(list((tmp_path / "cache").glob("doctor-*.json"))) == 1
    monkeypatch.setattr(doctor, "_checked", {})
    for f in (tmp_path / "cache").glob("*"):
        f.unlink()
    failing = doctor.Report("bubblewrap")
    failing.add("read a canary file planted outside the jail", False, "read it")
    monkeypatch.setattr(doctor, "run", lambda quick, zygote: failing)
    with pytest.raises(doctor.JailUnsound):
        doctor.ensure_sound(zygote)


def test_doctor_contains_every_canary_attack(zygote):
    bubblewrap(zygote)
    report = doctor.run(zygote=zygote)
    assert report.ok, report.render()
    assert len(report.findings) >= 15


def test_without_bubblewrap_the_grader_falls_back_loudly_and_records_it(tmp_path):
    env = dict(os.environ, GRADER_JAIL="process")
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "day45-attention",
                           str(EXERCISES / "day45-attention" / "solution"), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    grade = json.loads(proc.stdout)
    assert proc.returncode == 0 and grade["passed"] and grade["isolation"] == "process"
    assert "WARNING" in proc.stderr and "bubblewrap" in proc.stderr


def test_the_bubblewrap_command_hides_the_project(tmp_path):
    argv = launcher.bwrap_argv("/usr/bin/bwrap", 3)
    binds = [argv[i + 2] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")]
    assert not any(Path(b) == ROOT or Path(b) in (ROOT / "exercises", ROOT / "grader") for b in binds)
    assert "--unshare-net" in argv and "--die-with-parent" in argv and "--clearenv" in argv
    assert "--unshare-pid" in argv and "--new-session" in argv
    assert {f"/jail/{n}" for n in launcher.JAIL_FILES} <= set(binds)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to share")
def test_a_jail_shares_the_graders_cpu_only_while_it_lives(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.py").write_text("import os\ndef cpus():\n    return sorted(os.sched_getaffinity(0))\n")
    import torch
    before, threads = os.sched_getaffinity(0), torch.get_num_threads()
    torch.set_num_threads(2)
    session = SubmissionSession(sub, ["m"], Limits())
    try:
        jail_cpus = session.m.cpus()
        assert len(jail_cpus) == 1 and os.sched_getaffinity(0) == set(jail_cpus)
        assert torch.get_num_threads() == 1         # no helper threads fighting for that CPU
    finally:
        session.close()
        assert os.sched_getaffinity(0) == before and torch.get_num_threads() == 2
        torch.set_num_threads(threads)


def test_sharing_the_cpu_can_be_turned_off(tmp_path, monkeypatch):
    from grader.jail.client import CpuShare
    monkeypatch.setattr(CpuShare, "enabled", False)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.py").write_text("import os\ndef cpus():\n    return len(os.sched_getaffinity(0))\n")
    session = SubmissionSession(sub, ["m"], Limits())
    try:
        assert session.m.cpus() >= 1 and session._cpu.cpu is None
    finally:
        session.close()


def test_a_spawn_nobody_waited_for_still_reports_why_it_failed(zygote):
    """Spawning does not wait for the zygote's answer; a failure shows when the grader asks."""
    read, write = os.pipe()
    try:
        jail_id, uid, gid = launcher.next_identity()
        zygote.spawn(jail_id, uid, gid, Limits().for_jail(), [read, write])     # one pipe short
        ended = zygote.reap(jail_id)
        assert "three file descriptors" in ended["error"]
        assert zygote.reap(jail_id) is None                 # told once, then forgotten
    finally:
        os.close(read)
        os.close(write)


LOADING_CHECKS = '''
import torch
from grader.testkit import check

@check(points=1, rule="head-split", day=45)
def test_load_then_call(submission):
    m = submission.m.Net()
    submission.load(m, {"w.weight": torch.ones(2, 2)})
    assert submission.m.total(m) == 4.0            # loaded before the call ran

@check(points=1, rule="head-split", day=45)
def test_load_only(submission):
    submission.load(submission.m.Net(), {"w.weight": torch.ones(3, 3)})

@check(points=1, rule="head-split", day=45)
def test_after(submission):
    assert submission.m.touched() == 1
'''


def test_weights_load_with_the_next_request_and_fail_the_check_that_asked(tmp_path):
    """A load travels with the next request, or at the end of its check: one round trip fewer,
    and a load that does not fit still fails its own check, not a later one."""
    from grader.grading.runner import run_hidden_tests
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_loading.py").write_text(LOADING_CHECKS)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.py").write_text("import torch\nTOUCHED = 0\n"
                              "class Net(torch.nn.Module):\n"
                              "    def __init__(self):\n"
                              "        super().__init__()\n"
                              "        self.w = torch.nn.Linear(2, 2, bias=False)\n"
                              "    def load_state_dict(self, *a, **k):\n"
                              "        raise AssertionError('never called: the grader copies by name')\n"
                              "def touched():\n"
                              "    return TOUCHED + 1\n"
                              "def total(net):\n"
                              "    return float(net.w.weight.sum())\n")
    session = SubmissionSession(sub, ["m"], Limits())
    try:
        results = {c.id: c for c in run_hidden_tests(hidden, session).results}
    finally:
        session.close()
    assert results["load-then-call"].passed
    assert not results["load-only"].passed
    assert "has shape [2, 2]; expected [3, 3]" in results["load-only"].message
    assert results["after"].passed


# -- the seccomp filter, run by a small classic-BPF interpreter -------------------------------------

def run_filter(nr: int, args=(0, 0, 0, 0, 0, 0), arch="x86_64", audit=None) -> int:
    """What the filter for `arch` returns for one system call: the kernel's reading of seccomp_data."""
    program = sandbox._bpf_program(arch)
    code = [struct.unpack("HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = struct.pack("<iIQ6Q", nr, sandbox.AUDIT_ARCH[arch] if audit is None else audit, 0, *args)
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:                                      # BPF_LD | BPF_W | BPF_ABS
            acc, pc = struct.unpack_from("<I", data, k)[0], pc + 1
        elif op == 0x06:                                    # BPF_RET
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += 1 + (jt if taken else jf)


ARCHES = sorted(sandbox.SYSCALLS)


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("call", ["socket", "socketpair"])
def test_the_filter_denies_socket_families_beyond_unix_and_ip_with_an_errno(arch, call):
    nr = sandbox.SYSCALLS[arch][call]
    allow, errno_ = sandbox.SECCOMP_RET_ALLOW, sandbox.SECCOMP_RET_ERRNO
    for family in (sandbox.AF_UNIX, sandbox.AF_INET, sandbox.AF_INET6):
        assert run_filter(nr, (family, 1, 0, 0, 0, 0), arch) == allow
        assert run_filter(nr, ((7 << 32) | family, 1, 0, 0, 0, 0), arch) == allow   # an int: low 32 bits
    assert run_filter(nr, (sandbox.AF_NETLINK, 3, sandbox.NETLINK_ROUTE, 0, 0, 0), arch) == allow
    for protocol in sandbox.DENIED_NETLINK.values():
        got = run_filter(nr, (sandbox.AF_NETLINK, 3, protocol, 0, 0, 0), arch)
        assert got == errno_ | sandbox.EPROTONOSUPPORT
    for family in [*sandbox.DENIED_FAMILIES.values(), 0, 3, 45, 46, 255, 0xFFFFFFFF]:
        assert run_filter(nr, (family, 1, 0, 0, 0, 0), arch) == errno_ | sandbox.EAFNOSUPPORT, family


@pytest.mark.parametrize("arch", ARCHES)
def test_the_filter_kills_what_it_denies_and_allows_the_rest(arch):
    calls = sandbox.SYSCALLS[arch]
    kill, allow = sandbox.SECCOMP_RET_KILL_PROCESS, sandbox.SECCOMP_RET_ALLOW
    denied = [calls[name] for name in sandbox.DENIED if name in calls]
    assert len(denied) >= len(sandbox.DENIED) - 2                       # iopl, ioperm: x86 only
    assert all(run_filter(nr, arch=arch) == kill for nr in denied)
    ordinary = set(range(0, 300)) - set(calls.values())                 # read, write, mmap ...
    assert all(run_filter(nr, arch=arch) == allow for nr in ordinary)
    assert run_filter(calls["clone"], (0x11, 0, 0, 0, 0, 0), arch) == allow        # fork
    assert run_filter(calls["clone"], (sandbox.CLONE_NEWUSER, 0, 0, 0, 0, 0), arch) == kill
    assert run_filter(calls["clone3"], arch=arch) == sandbox.SECCOMP_RET_ERRNO | sandbox.ENOSYS
    for other in (0x40000003, 0x40000028, *(a for n, a in sandbox.AUDIT_ARCH.items() if n != arch)):
        assert run_filter(calls["socket"], (sandbox.AF_INET, 1, 0, 0, 0, 0), arch, audit=other) == kill
    if arch == "x86_64":
        x32 = sandbox.X32_SYSCALL_BIT | calls["socket"]
        assert run_filter(x32, (sandbox.AF_INET, 1, 0, 0, 0, 0), arch) == kill


def test_each_machine_runs_its_own_filter():
    assert sandbox.filter_arch("x86_64") == sandbox.filter_arch("AMD64") == "x86_64"
    assert sandbox.filter_arch("aarch64") == sandbox.filter_arch("arm64") == "aarch64"
    assert sandbox.filter_arch("riscv64") is None and not sandbox.seccomp_supported("s390x")
    assert sandbox._bpf_program("x86_64") != sandbox._bpf_program("aarch64")


SOCKETS = """
import errno, socket
def vsock():
    try:
        socket.socket(40, socket.SOCK_STREAM).close()
    except OSError as exc:
        return errno.errorcode[exc.errno]
    return "created"
def usable():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, socket.socket(socket.AF_UNIX) as u:
        pass
    a, b = socket.socketpair()
    a.close(), b.close()
    return [name for _, name in socket.if_nameindex()]
"""


def test_learner_code_sees_a_denied_socket_as_an_oserror(tmp_path, zygote):
    bubblewrap(zygote)
    (tmp_path / "s.py").write_text(SOCKETS)
    jail = Jail(tmp_path, Limits(), zygote=zygote)
    try:
        assert jail.request("import", 10, modules=["s"]) == {"s": None}
        assert jail.request("call", 10, target={"module": "s", "path": ["vsock"]}) == "EAFNOSUPPORT"
        assert jail.request("call", 10, target={"module": "s", "path": ["usable"]}) == ["lo"]
    finally:
        jail.close()


def test_on_an_architecture_without_the_filter_the_doctor_fails(monkeypatch):
    me = {"uid": launcher.UID_BASE + 1, "euid": launcher.UID_BASE + 1, "cap_eff": "0", "cap_prm": "0",
          "no_new_privs": "1", "groups": [], "seccomp": "2", "env": ["PATH"]}

    def seccomp_finding(machine, status):
        monkeypatch.setattr(platform, "machine", lambda: machine)
        report = doctor.Report("bubblewrap")
        doctor._identity(report, lambda fn: {**me, "seccomp": status}, zygote=None)
        return {f.attack: f for f in report.findings}["a seccomp filter is installed"], report

    for machine in ("riscv64", "s390x", "ppc64le"):            # no filter there: never a pass
        for status in ("0", "2"):
            found, report = seccomp_finding(machine, status)
            assert not found.contained and machine in found.detail and not report.ok
    for machine in ("x86_64", "aarch64"):
        found, report = seccomp_finding(machine, "0")             # a filter due, none installed
        assert not found.contained and not report.ok
        found, report = seccomp_finding(machine, "2")
        assert found.contained and report.ok, report.render()


# -- what of site-packages a jail sees -------------------------------------------------------------

def test_the_closure_follows_unconditional_requirements_only():
    installed = {"torch": ["filelock", "Typing_Extensions>=4", "optree; extra == 'optree'",
                           'colorama; sys_platform == "nonesuch"', "sympy"],
                 "sympy": ["mpmath<1.4", "pytest; extra == 'dev'"], "mpmath": [], "filelock": None,
                 "typing-extensions": [], "numpy": [], "optree": [], "colorama": [], "pytest": []}
    got = launcher.requirement_closure(["torch", "numpy", "msgpack"], installed.get)
    assert got == {"torch", "typing-extensions", "sympy", "mpmath", "numpy"}   # filelock, msgpack: absent


def test_a_distributions_entries_are_its_top_level_names():
    record = ["torch/__init__.py", "torch/lib/libtorch.so", "torch-2.13.0.dist-info/RECORD",
              "../../../bin/torchrun", "__pycache__/typing_extensions.cpython-311.pyc",
              "typing_extensions.py", "numpy.libs/libgfortran.so", "/etc/absolute"]
    assert launcher.top_level_entries(record) == {
        "torch", "torch-2.13.0.dist-info", "__pycache__/typing_extensions.cpython-311.pyc",
        "typing_extensions.py", "numpy.libs"}


def test_the_bubblewrap_command_binds_only_the_jails_distributions():
    entries = launcher.jail_site_entries()
    names = {e.split("/")[0].split("-")[0] for found in entries.values() for e in found}
    assert {"torch", "numpy", "msgpack", "sympy", "jinja2", "typing_extensions"} <= names
    assert not names & {"scipy", "pytest", "_pytest", "transformers", "pydantic", "hypothesis", "grader",
                        "gpt_bughunt_grader", "__editable__.gpt_bughunt_grader"}
    argv = launcher.bwrap_argv("/usr/bin/bwrap", 3)
    masked = {argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"}
    sealed = {argv[i + 1] for i, a in enumerate(argv) if a == "--remount-ro"}
    for folder in launcher.site_folders():
        if any(launcher._is_within(folder, r) for r in [*launcher._python_roots(), Path("/usr")]):
            assert str(folder) in masked and str(folder) in sealed, folder
    binds = [argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind"]
    inside = [b for b in binds if any(f in Path(b).parents for f in entries)]
    assert sorted(inside) == sorted(str(f / e) for f, found in entries.items() for e in found)


LOOK = """
import importlib.util, os
def look(folders, names):
    shown = {f: sorted(os.listdir(f)) if os.path.isdir(f) else None for f in folders}
    return shown, {n: importlib.util.find_spec(n) is not None for n in names}
"""


def test_a_jail_sees_only_the_standard_library_and_the_jails_distributions(tmp_path, zygote):
    bubblewrap(zygote)
    (tmp_path / "look.py").write_text(LOOK)
    jail = Jail(tmp_path, Limits(), zygote=zygote)
    folders = [str(f) for f in launcher.site_folders()]
    wanted = ["torch", "numpy", "msgpack", "sympy", "json", "sqlite3", "ctypes",
              "scipy", "pytest", "transformers", "pydantic", "grader", "yaml"]
    try:
        assert jail.request("import", 10, modules=["look"]) == {"look": None}
        shown, found = jail.request("call", 10, target={"module": "look", "path": ["look"]},
                                    args=[folders, wanted])
    finally:
        jail.close()
    entries = launcher.jail_site_entries()
    allowed = {str(f): {e.split("/")[0] for e in names} for f, names in entries.items()}
    for folder, names in shown.items():
        assert set(names or []) <= allowed.get(folder, set()), (folder, names)
    assert found == {name: name in ("torch", "numpy", "msgpack", "sympy", "json", "sqlite3", "ctypes")
                     for name in wanted}


def test_a_private_package_installed_into_site_packages_is_simply_not_bound(monkeypatch):
    """A wheel install puts the grader (and a course package, if one is installed) into
    site-packages: masking them there would need a mount point in the read-only site view; they are
    left out of it instead."""
    site = next(iter(launcher.jail_site_entries()))
    hidden = [site / "grader", site / "exercises", site / "torch" / "nothing-private"]
    monkeypatch.setattr(launcher, "private_paths", lambda: hidden)
    monkeypatch.setattr(Path, "is_dir", lambda self: True)
    argv = launcher.bwrap_argv("/usr/bin/bwrap", 3)
    masked = {argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"}
    assert str(site / "grader") not in masked and str(site / "exercises") not in masked
    assert str(site / "torch" / "nothing-private") in masked          # inside a bound entry: masked
    assert launcher.shown_in_site(Path("/etc/x"), [Path("/")], [site], {}) is True


def test_record_paths_read_as_importlib_reads_them(tmp_path):
    """The jail's site view reads RECORD's first column quickly; a quoted path (a comma in a
    name) is parsed by importlib.metadata, so both give the paths importlib gives."""
    import importlib.metadata

    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    for record in (
        "demo/__init__.py,sha256=abc,10\ndemo-1.0.dist-info/RECORD,,\n",
        'demo/__init__.py,sha256=abc,10\n"demo/a,b.py",sha256=def,3\ndemo-1.0.dist-info/RECORD,,\n',
    ):
        (info / "RECORD").write_text(record)
        dist = importlib.metadata.PathDistribution(info)
        assert launcher._record_paths(dist) == [str(f) for f in dist.files]
    assert "demo/a,b.py" in launcher._record_paths(dist)
    assert launcher.top_level_entries(launcher._record_paths(dist)) == {"demo", "demo-1.0.dist-info"}
