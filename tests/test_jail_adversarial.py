"""The adversarial corpus (tests/adversarial/cases.py), graded through the real grading path.

For every case: the grade is `passed: false` with the expected error kind or failing check; no
process of its jails is left; nothing was written outside the jail; nothing hidden (a canary
planted in the hidden tests, the key and the solution, a secret on the host, a concurrent
submission's secret) appears anywhere in the grade. The cases share one warm zygote and run with
short limits, so the whole corpus takes well under three minutes.

A leak is judged by the planted canaries only, and a verdict by what the grader decided: no case
walks for a while and judges what it reached, and walks go in sorted order over bounded trees, so
no outcome depends on the machine's speed or on the order a file system lists its entries.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from adversarial.cases import CASES
from conftest import EXERCISES, ROOT
from gradebook_checks import Recorder, differences
from report_checks import check_report

import grader.grading.grade as grading
from grader.catalog.exercises import load_exercise
from grader.jail import launcher
from grader.models import Grade, Limits
from grader.grading.session import SubmissionSession
from reports import FORMATS, render

HIDDEN_MARKER = "Hidden tests for day45-attention"        # the hidden tests' first line


class Arena:
    """Secrets planted on the host and in a copy of the exercise, and the traps that watch them."""

    def __init__(self, base: Path):
        self.canary = "ADV-CANARY-" + secrets.token_hex(10)
        self.mark = "adv-mark-" + secrets.token_hex(6)
        self.sibling = "ADV-SIBLING-" + secrets.token_hex(8)
        self.plant = base / "plant"
        self.plant.mkdir()
        os.chmod(base, 0o755)
        os.chmod(self.plant, 0o777)            # world-writable: only the jail keeps a learner out
        (self.plant / "key.toml").write_text(f'secret = "{self.canary}"\n')
        # the exercise the corpus is graded against: the real one, with canaries in its secrets
        self.exercise_dir = base / "exercise"
        shutil.copytree(EXERCISES / "day45-attention", self.exercise_dir)
        hidden = self.exercise_dir / "hidden" / "test_attention.py"
        hidden.write_text(hidden.read_text() + f"\n# {self.canary}\n")
        solution = self.exercise_dir / "solution" / "attention.py"
        solution.write_text(solution.read_text() + f"\n# {self.canary}\n")
        (self.exercise_dir / "key.toml").write_text(f'answer = "{self.canary}"\n')
        for p in self.exercise_dir.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.setblocking(False)
        self.exercise = load_exercise("day45-attention").model_copy(update={"limits": Limits(
            wall_seconds=12, call_seconds=5, memory_mb=1024, processes=32, file_size_mb=8,
            output_bytes=64 * 1024)})
        self.uids: list[int] = []
        self.watched = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), self.plant,
                        Path(os.path.expanduser("~")), self.exercise_dir, ROOT / "grader" / "jail",
                        *{Path(p) for p in (sysconfig.get_paths()["purelib"], sys.prefix)}]
        # folders no one else writes to: any new entry there is an escape; in shared folders
        # (/tmp, the home folder) an entry named with this run's mark is
        self.strict = {self.plant, self.exercise_dir, ROOT / "grader" / "jail",
                       Path(sysconfig.get_paths()["purelib"])}
        self.listing = {d: self._list(d) for d in self.watched}

    @staticmethod
    def _list(d: Path) -> set[str]:
        try:
            return set(os.listdir(d))
        except OSError:
            return set()

    def code(self, template: str) -> str:
        return (template.replace("@PLANT@", str(self.plant)).replace("@CANARY@", self.canary)
                .replace("@PORT@", str(self.port)).replace("@MARK@", self.mark)
                .replace("@SIBLING@", self.sibling).replace("@EXERCISE@", str(self.exercise_dir)))

    def new_files(self) -> list[str]:
        found = []
        for d in self.watched:
            for name in self._list(d) - self.listing[d]:
                if self.mark in name or d in self.strict:
                    found.append(str(d / name))
        return found

    def network_hits(self) -> list[str]:
        hits = []
        try:
            conn, _ = self.tcp.accept()
            hits.append("tcp")
            conn.close()
        except BlockingIOError:
            pass
        try:
            self.udp.recv(100)
            hits.append("udp")
        except BlockingIOError:
            pass
        return hits

    def close(self):
        self.tcp.close()
        self.udp.close()


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    base = tmp_path_factory.mktemp("arena")
    arena = Arena(base)
    real_dir = grading.exercise_dir
    real_identity = launcher.next_identity

    def exercise_dir(exercise_id):
        return arena.exercise_dir if exercise_id == "day45-attention" else real_dir(exercise_id)

    def next_identity():
        ident = real_identity()
        arena.uids.append(ident[1])
        return ident

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grading, "exercise_dir", exercise_dir)
        mp.setattr(launcher, "next_identity", next_identity)
        yield arena
    arena.close()


def write_submission(arena: Arena, where: Path, code: str, case_name: str) -> Path:
    arena.mark = f"adv-{secrets.token_hex(5)}-{case_name}"      # a new mark per case
    sub = where / "submission"
    sub.mkdir()
    base = (EXERCISES / "day45-attention" / "solution" / "attention.py").read_text()
    (sub / "attention.py").write_text(base + "\n# --- the attack ---\n" + arena.code(code))
    return sub


VICTIM = '''
import socket as _socket
_secret = "@SIBLING@"
for _p in ("/tmp/victim-secret", "/dev/shm/victim-secret"):
    with open(_p, "w") as _f:
        _f.write(_secret)
_listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
_listener.bind("\\0adversarial-victim")
_listener.listen(1)
'''


def grade_case(case, arena: Arena, sub: Path) -> dict:
    if case.reports is not None:
        return check_reports(case, sub, grading.grade(arena.exercise, sub))
    if case.cli:
        env = dict(os.environ, ADV_SECRET=arena.canary, ADV_KEY=arena.canary)
        proc = subprocess.run([sys.executable, "-m", "grader", "grade", "day45-attention", str(sub),
                               "--format", "json"], capture_output=True, text=True, cwd=ROOT,
                              env=env, timeout=300)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert arena.canary not in proc.stdout + proc.stderr
        return json.loads(proc.stdout)
    return json.loads(grading.grade(arena.exercise, sub).model_dump_json())


# what a learner's text may not do to a terminal, whatever else a report may hold
LEARNER_ACTING = ("\x1b", "\x07", "\x9b", "\x85", "\x00", "\u202e", "\u2066", "\ud800")


def check_reports(case, sub: Path, grade) -> dict:
    """Every format in both languages from the grade made in process (`reports.render`, what the
    CLI calls), then `grader grade` itself in the formats the case names, at once (each run
    costs a fresh process and jail, about 9 s: the corpus names two, to stay quick)."""
    for fmt in FORMATS:
        for lang in ("en", "zh-TW"):
            check_report(fmt, render(grade, fmt, lang), lang)
    if grade.output.cut_bytes:          # printed more than is kept: the start, the end, the count
        text = render(grade, "text", "en")
        assert grade.output.start and grade.output.end and "bytes cut" in text, text[-2000:]
    procs = {fmt: subprocess.Popen([sys.executable, "-m", "grader", "grade", "day45-attention", str(sub),
                                    "--format", fmt, "--lang", "en"], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE) for fmt in case.reports}
    for fmt, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, (fmt, err[-3000:])
        assert b"Traceback" not in err, (fmt, err[-3000:])
        text = out.decode("utf-8")                     # strict: no lone surrogate reached it
        check_report(fmt, text)
        if fmt == "text":
            assert not any(ch in text for ch in LEARNER_ACTING), fmt
    return json.loads(grade.model_dump_json())


@pytest.fixture(scope="module")
def recorders(tmp_path_factory, postgres):
    """A SQLite and a PostgreSQL gradebook: every attack's grade must read back as it was made."""
    recs = [Recorder(str(tmp_path_factory.mktemp("adversarial-book") / "gradebook.db")),
            Recorder(postgres.create_database())]
    yield recs
    for rec in recs:
        rec.book.close()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_attack_is_contained(case, arena, tmp_path, recorders):
    if case.needs_jail and launcher.default_zygote().isolation != "bubblewrap":
        if os.environ.get("GRADER_REQUIRE_BWRAP"):
            pytest.fail("bubblewrap is required (GRADER_REQUIRE_BWRAP) but the jail fell back")
        pytest.skip("contained only by the bubblewrap jail; this machine grades without it")
    sub = write_submission(arena, tmp_path, case.code, case.name)
    victim = None
    if case.name == "read-sibling-submission":
        vroot = tmp_path / "victim"
        vroot.mkdir()
        (vroot / "attention.py").write_text(
            (EXERCISES / "day45-attention" / "solution" / "attention.py").read_text()
            + f"\n# {arena.sibling}\n" + arena.code(VICTIM))
        victim = SubmissionSession(vroot, ["attention"], arena.exercise.limits)
        victim.ensure_jail()
        assert victim.import_errors == {"attention": None}
    first = len(arena.uids)
    try:
        grade = grade_case(case, arena, sub)
    finally:
        if victim is not None:
            victim.close()
    if case.linger:
        time.sleep(case.linger)

    # the verdict: not passed, and for the reason the case is about
    text = json.dumps(grade)
    failing = [c for c in grade["checks"] if not c["passed"]]
    assert grade["passed"] is False, f"{case.name} passed: {text[:2000]}"
    assert grade["error"] is not None or failing, text[:2000]
    if case.error is not None:
        assert grade["error"] and grade["error"]["kind"] == case.error, text[:3000]
    if case.symptom is not None:
        symptoms = case.symptom if isinstance(case.symptom, tuple) else (case.symptom,)
        assert any(s in c["symptoms"] for c in failing for s in symptoms), text[:3000]
    if case.message is not None:
        messages = [c["message"] for c in failing] + ([grade["error"]["message"]] if grade["error"] else [])
        wanted = case.message if isinstance(case.message, tuple) else (case.message,)
        assert any(w in m for m in messages for w in wanted), text[:3000]

    # nothing hidden leaks, into any field of the grade
    for secret in (arena.canary, HIDDEN_MARKER, arena.sibling):
        assert secret not in text, f"{case.name} leaked {secret!r}"
    # and the gradebook keeps the grade whole, whatever text the attack put in it
    made = Grade.model_validate(grade)
    for rec in recorders:
        assert differences(rec.round_trip(made), made) == [], rec.book.backend
    # nothing escaped: no process of its jails, no file outside them, no packet out
    if not case.cli:
        launcher.collect()
        if os.geteuid() == 0:
            for uid in arena.uids[first:]:
                assert launcher.processes_of_uid(uid) == [], f"uid {uid} still runs processes"
    assert arena.new_files() == []
    assert arena.network_hits() == []
    assert not (arena.plant / f"{arena.mark}-unpickled").exists()


def test_after_the_corpus_the_solution_still_passes(arena):
    """Nothing an attack did poisons a later grade (site-packages, the jail's code, the zygote)."""
    grade = grading.grade(arena.exercise, EXERCISES / "day45-attention" / "solution")
    assert grade.passed and grade.error is None, grade.model_dump_json()[:2000]
    assert "POISONED" not in grade.output.start + grade.output.end
