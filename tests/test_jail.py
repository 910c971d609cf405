"""The jail itself: what a jail is, how it ends, the fallback, and the doctor's verdict."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXERCISES, ROOT

from grader import doctor
from grader.jail import launcher
from grader.jail.client import Jail, JailCrash, JailTimeout, LearnerError, Limits
from grader.session import SubmissionSession

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
        assert me["seccomp"] == "2" or platform.machine() != "x86_64"
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
    from grader.grading import grade
    g = grade("day45-attention", sub)
    by_id = {c.id: c for c in g.checks}
    assert g.passed is False and g.error is None and g.isolation in ("bubblewrap", "process")
    assert by_id["softmax-matches-reference"].passed                    # before the crash
    assert by_id["mha-rejects-indivisible-heads"].passed                # after it, in a fresh jail
    crashed = by_id["split-and-merge-heads"]
    assert not crashed.passed and "exception" in crashed.symptoms and "code 9" in crashed.message


def test_output_is_kept_across_jails_and_capped(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "m.py").write_text("print('hello from the jail')\nimport sys\nsys.stdout.write('x' * 5000)\n")
    session = SubmissionSession(sub, ["m"], Limits(output_bytes=1000))
    try:
        session.ensure_jail()
        out = session.output()
        assert out.startswith("hello from the jail") and len(out) == 1000
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
    from grader.runner import run_hidden_tests
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
    assert not results["load-only"].passed and "has shape [2, 2]; expected [3, 3]" in results["load-only"].message
    assert results["after"].passed
