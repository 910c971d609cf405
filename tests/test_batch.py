"""`grader batch`, `grader regrade` and `grader gradebook`, run as an instructor runs them.

A small class (day49-data: the fastest code exercise) is graded for real, through the jail, into
SQLite and into a throwaway PostgreSQL cluster, locally and on a real Dask LocalCluster of worker
processes; a batch is killed with SIGKILL half way and finished by running it again; an exercise
gets a new hidden check and `grader regrade` reports whose scores changed. The exercise is used
from a copy (GRADER_EXERCISES_DIR) whose per-call limit is 4 s, so the endless loop at import of
a hostile learner costs seconds, not a minute. The 200-learner acceptance run is
benchmarks/batch_200.py.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.course.sampleclass import make_class
from grader.store import Gradebook

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "day49-data"
KINDS = ("solution", "alternative:unfold-gather", "mutant:unshifted-targets",
         "mutant:windows-off-the-end", "mutant:loss-without-flattening")
HOSTILE = ("import-loop", "syntax-error", "missing-file")
FAST_LIMITS = "\n[limits]\nwall_seconds = 30\ncall_seconds = 4\n"


def copy_exercise(dest: Path, extra_toml: str = FAST_LIMITS) -> Path:
    """A course's own edition of the exercises: a copy, used through GRADER_EXERCISES_DIR."""
    shutil.copytree(ROOT / "exercises" / EXERCISE, dest / EXERCISE,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(dest / EXERCISE / "exercise.toml", "a") as f:
        f.write(extra_toml)
    return dest


def grader(*args, exercises: Path, timeout=300, check_rc: int | None = 0):
    env = {**os.environ, "GRADER_EXERCISES_DIR": str(exercises)}
    proc = subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    return proc


def snapshot(db: str) -> dict[str, tuple]:
    """learner -> what a gradebook says of their current grade (what must not depend on the engine)."""
    with Gradebook(db) as gb:
        return {c.learner: (c.grade.score, c.grade.max_score, c.grade.passed,
                            c.grade.error.kind if c.grade.error else None,
                            tuple((ch.id, ch.passed, ch.points) for ch in c.grade.checks),
                            tuple(sorted(d.mutant or d.rule for d in c.grade.diagnosis)), c.digest, c.version)
                for c in gb.current_grades(EXERCISE)}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The exercises copy and a class of 8: correct, buggy and hostile."""
    root = tmp_path_factory.mktemp("course")
    exercises = copy_exercise(root / "exercises")
    manifest = make_class(EXERCISE, root / "class", 8, hostile=HOSTILE, only=KINDS)
    return {"exercises": exercises, "src": root / "class", "manifest": manifest, "root": root}


@pytest.fixture(scope="module")
def first_batch(course):
    """The class graded once into SQLite by the local pool, with --out."""
    db, out = str(course["root"] / "class.db"), course["root"] / "out"
    proc = grader("batch", EXERCISE, course["src"], "--db", db, "--workers", 2, "--out", out,
                  exercises=course["exercises"])
    return {"db": db, "out": out, "stdout": proc.stdout}


def test_a_class_is_graded_into_the_gradebook_with_reports(course, first_batch):
    manifest, out = course["manifest"], first_batch["out"]
    assert "8 to grade" in first_batch["stdout"] and "throughput:" in first_batch["stdout"]
    grades = snapshot(first_batch["db"])
    assert set(grades) == set(manifest)
    for learner, kind in manifest.items():
        score, max_score, passed, error, checks, named, *_ = grades[learner]
        assert max_score == 20
        if kind in ("solution", "alternative:unfold-gather"):
            assert passed and score == 20, (learner, kind, grades[learner])
        elif kind.startswith("mutant:"):
            assert not passed and 0 < score < 20 and error is None, (learner, kind, grades[learner])
        else:
            assert not passed and score == 0 and error is not None, (learner, kind, grades[learner])
    by_kind = {kind: grades[learner] for learner, kind in manifest.items()}
    assert "unshifted-targets" in by_kind["mutant:unshifted-targets"][5]
    assert by_kind["hostile:import-loop"][3] in ("timeout", "crash")
    assert by_kind["hostile:syntax-error"][3] == "invalid-submission"
    assert by_kind["hostile:missing-file"][3] == "invalid-submission"
    with Gradebook(first_batch["db"]) as gb:
        counts = gb.counts(EXERCISE)
    assert counts["final_runs"] == counts["graded_pairs"] == counts["submissions"] == 8
    assert sorted(p.stem for p in (out / "grades").glob("*.json")) == sorted(manifest)
    one = json.loads((out / "grades" / "s000.json").read_text())
    assert one["student"] == "s000" and one["exercise"] == EXERCISE
    assert json.loads((out / "batch.json").read_text())["graded"] == 8
    try:
        import reports.class_report  # noqa: F401
    except ImportError:
        assert "no class report" in first_batch["stdout"]
    else:
        assert (out / "class.html").stat().st_size > 0 and (out / "grades.csv").stat().st_size > 0


def test_a_rerun_grades_only_what_is_new_or_changed_and_force_regrades(course, first_batch, tmp_path):
    db = str(tmp_path / "copy.db")
    with sqlite3.connect(first_batch["db"]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    src = tmp_path / "class"
    shutil.copytree(course["src"], src)
    before = snapshot(db)

    again = grader("batch", EXERCISE, src, "--db", db, exercises=course["exercises"])
    assert "0 to grade, 8 unchanged" in again.stdout
    assert snapshot(db) == before

    learner = next(k for k, v in course["manifest"].items() if v == "solution")
    with open(src / learner / "data.py", "a") as f:
        f.write("\n# resubmitted after the deadline\n")
    changed = grader("batch", EXERCISE, src, "--db", db, exercises=course["exercises"])
    assert "1 to grade, 7 unchanged" in changed.stdout
    after = snapshot(db)
    assert after[learner][6] != before[learner][6]                  # the new submission is current
    assert {k: v for k, v in after.items() if k != learner} == {k: v for k, v in before.items() if k != learner}

    forced = grader("batch", EXERCISE, src, "--db", db, "--force", exercises=course["exercises"])
    assert "8 to grade, 0 unchanged" in forced.stdout
    with Gradebook(db) as gb:
        counts = gb.counts(EXERCISE)
    assert counts["submissions"] == 9 and counts["graded_pairs"] == 9 and counts["final_runs"] == 17
    assert {k: v[:6] for k, v in snapshot(db).items()} == {k: v[:6] for k, v in after.items()}


def test_postgresql_gets_the_same_grades_as_sqlite(course, first_batch, postgres):
    url = postgres.create_database()
    proc = grader("batch", EXERCISE, course["src"], "--db", url, "--workers", 2, exercises=course["exercises"])
    assert "8 to grade" in proc.stdout
    assert snapshot(url) == snapshot(first_batch["db"])


def test_the_dask_cluster_produces_the_same_gradebook_as_the_local_pool(course, first_batch, tmp_path,
                                                                        monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("GRADER_EXERCISES_DIR", str(course["exercises"]))    # the workers' environment
    db = str(tmp_path / "dask.db")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=40) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://127.0.0.1:")
        proc = grader("batch", EXERCISE, course["src"], "--db", db, "--scheduler", address,
                      exercises=course["exercises"])
    assert "Dask cluster at tcp://127.0.0.1" in proc.stdout and "8 to grade" in proc.stdout
    assert snapshot(db) == snapshot(first_batch["db"])
    with Gradebook(db) as gb:
        workers = {r["worker"] for c in gb.current_grades(EXERCISE)
                   for s in gb.learner(c.learner)["submissions"] for r in s["runs"]}
    assert len(workers - {"batch"}) >= 1                           # graded on the cluster's workers


def final_runs(db: str) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM grade_runs WHERE status IN ('graded', 'unreadable')"
                                ).fetchone()[0]
    except sqlite3.OperationalError:                # not created yet
        return 0


def test_kill_9_half_way_then_the_same_command_finishes_with_no_loss_and_no_duplicate(tmp_path):
    # every grade of this edition takes a second more (an extra hidden check that waits), so the
    # batch is still running when it is killed
    exercises = copy_exercise(tmp_path / "exercises")
    (exercises / EXERCISE / "hidden" / "test_zz_slow.py").write_text(
        "import time\nfrom grader.testkit import check\n\n\n"
        "@check(points=0, rule='target-shift', day=49, title='takes its time')\n"
        "def test_takes_its_time(submission):\n    time.sleep(1.0)\n")
    n = 8
    make_class(EXERCISE, tmp_path / "class", n, only=KINDS)
    db = str(tmp_path / "kill.db")
    argv = [sys.executable, "-m", "grader", "batch", EXERCISE, str(tmp_path / "class"), "--db", db,
            "--workers", "1"]
    env = {**os.environ, "GRADER_EXERCISES_DIR": str(exercises)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while final_runs(db) < n // 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the batch ended (exit {proc.returncode}) before it could be killed:\n"
                        f"{out.decode()}\n{err.decode()[-3000:]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        done_at_kill = final_runs(db)
        assert proc.returncode == -signal.SIGKILL
        assert n // 2 <= done_at_kill < n, f"killed at {done_at_kill} of {n}: not half way"
        deadline = time.monotonic() + 20          # the pool's workers die with the batch (PDEATHSIG)
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            pytest.fail("worker processes outlived the killed batch")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    rerun = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{n - done_at_kill} to grade, {done_at_kill} unchanged" in rerun.stdout
    with Gradebook(db) as gb:
        counts = gb.counts(EXERCISE)
        learners = {c.learner for c in gb.current_grades(EXERCISE)}
    assert counts["final_runs"] == counts["graded_pairs"] == counts["submissions"] == n
    assert len(learners) == n


def test_a_new_hidden_check_makes_regrade_report_the_changed_scores(tmp_path):
    exercises = copy_exercise(tmp_path / "exercises")
    manifest = make_class(EXERCISE, tmp_path / "class", 4, hostile=("syntax-error",),
                          only=("solution", "mutant:unshifted-targets", "mutant:windows-off-the-end"))
    db = str(tmp_path / "regrade.db")
    grader("batch", EXERCISE, tmp_path / "class", "--db", db, exercises=exercises)
    before = snapshot(db)

    # the course adds a check worth 2 points: make_xy on three tokens
    ex = exercises / EXERCISE
    (ex / "hidden" / "test_zz_added.py").write_text(
        "import torch\nfrom grader.testkit import check, fail\n\n\n"
        "@check(points=2, rule='target-shift', day=49, title='make_xy on three tokens')\n"
        "def test_make_xy_on_three_tokens(submission):\n"
        "    x, y = submission.data.make_xy([5, 6, 7])\n"
        "    if torch.as_tensor(y).tolist() != [6, 7]:\n"
        "        fail(f'make_xy([5, 6, 7]) returned y = {torch.as_tensor(y).tolist()}; expected [6, 7]')\n")
    toml = (ex / "exercise.toml").read_text().replace("points = 20", "points = 22")
    (ex / "exercise.toml").write_text(toml)

    proc = grader("regrade", EXERCISE, "--db", db, exercises=exercises)
    assert "regrading 4 of 4 current submissions" in proc.stdout
    after = snapshot(db)
    kind = {k: v for k, v in manifest.items()}
    changed = {k for k in manifest if after[k][0] != before[k][0]}
    assert changed == {k for k, v in kind.items() if v in ("solution", "mutant:windows-off-the-end")}
    for learner in changed:
        assert after[learner][0] == before[learner][0] + 2
        assert f"{learner}  {before[learner][0]:g} -> {after[learner][0]:g} / 22  (+2)" in proc.stdout
    assert f"{len(changed)} scores changed" in proc.stdout
    assert all(after[k][1] == 22 for k in manifest)

    again = grader("regrade", EXERCISE, "--db", db, exercises=exercises)
    assert "regrading 0 of 4" in again.stdout and "no score changed" in again.stdout


def test_a_quiz_batch_records_a_malformed_answer_sheet_and_goes_on(tmp_path):
    manifest = make_class("day49-quiz", tmp_path / "class", 3, hostile=("malformed-toml", "missing-file"))
    db = str(tmp_path / "quiz.db")
    proc = grader("batch", "day49-quiz", tmp_path / "class", "--db", db, "--workers", 1,
                  exercises=ROOT / "exercises")
    assert "3 graded now" in proc.stdout and "of which 1 unreadable" in proc.stdout
    with Gradebook(db) as gb:
        current = {c.learner: c for c in gb.current_grades("day49-quiz")}
    bad = next(k for k, v in manifest.items() if v == "hostile:malformed-toml")
    assert current[bad].status == "unreadable"
    assert "malformed TOML" in current[bad].grade.error.message and current[bad].grade.score == 0


def test_gradebook_export_and_show(course, first_batch):
    db, exercises = first_batch["db"], course["exercises"]
    csv_out = grader("gradebook", "export", "--db", db, "--format", "csv", exercises=exercises).stdout
    lines = csv_out.splitlines()
    assert lines[0].startswith("learner,name,email,exercise,score,max_score,passed,status")
    assert len(lines) == 9 and {line.split(",")[0] for line in lines[1:]} == set(course["manifest"])
    rows = json.loads(grader("gradebook", "export", "--db", db, "--format", "json", exercises=exercises).stdout)
    assert len(rows) == 8 and all(r["grade"]["exercise"] == EXERCISE for r in rows)
    assert {r["learner"]: r["score"] for r in rows} == {k: v[0] for k, v in snapshot(db).items()}

    learner = next(k for k, v in course["manifest"].items() if v == "mutant:unshifted-targets")
    shown = grader("gradebook", "show", learner, "--db", db, exercises=exercises).stdout
    assert f"learner {learner}" in shown and "NOT PASSED" in shown and "unshifted-targets" in shown
    assert "attempt 1" in shown and "graded" in shown
    missing = grader("gradebook", "show", "nobody", "--db", db, exercises=exercises, check_rc=2)
    assert "no learner 'nobody'" in missing.stderr


def test_usage_errors_exit_2_without_grading(course, tmp_path):
    ex = course["exercises"]
    assert "EXERCISE" in grader("batch", "no-such-exercise", course["src"], "--db", tmp_path / "a.db",
                                exercises=ex, check_rc=2).stderr
    assert "does not exist" in grader("batch", EXERCISE, tmp_path / "missing", "--db", tmp_path / "a.db",
                                      exercises=ex, check_rc=2).stderr
    bad_db = grader("batch", EXERCISE, course["src"], "--db", "postgresql://nobody@127.0.0.1:1/none",
                    exercises=ex, check_rc=2)
    assert "cannot open the gradebook" in bad_db.stderr and "Traceback" not in bad_db.stderr


def test_a_class_archive_with_one_damaged_learner_zip_grades_the_others_and_exits_0(course, tmp_path):
    """Issue 12: one learner's damaged deflate stream fails that learner alone, with a reason."""
    import io
    import zipfile

    make_class(EXERCISE, tmp_path / "made", 2, only=("solution",))
    learners = sorted(p.name for p in (tmp_path / "made").iterdir())
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data.py", (tmp_path / "made" / learners[0] / "data.py").read_bytes() * 20)
    raw = bytearray(inner.getvalue())
    for k in range(60, 120):                           # inside the deflate stream of data.py
        raw[k] ^= 0x5A
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name in learners:
            zf.write(tmp_path / "made" / name / "data.py", f"class/{name}/data.py")
        zf.writestr("class/mallory.zip", bytes(raw))
    db, out = str(tmp_path / "g.db"), tmp_path / "out"
    proc = grader("batch", EXERCISE, archive, "--db", db, "--workers", 1, "--out", out,
                  exercises=course["exercises"])
    assert "3 graded now" in proc.stdout and "mallory: data.py cannot be read from the archive" in proc.stdout
    with Gradebook(db) as gb:
        current = {c.learner: c.grade for c in gb.current_grades(EXERCISE)}
    assert all(current[name].passed for name in learners)
    mallory = current["mallory"].error
    assert mallory.kind == "invalid-submission" and "data.py" in mallory.message
    report = json.loads((out / "batch.json").read_text())
    assert report["unreadable_found"][0]["learner"] == "mallory"
    assert (out / "grades" / "mallory.json").exists()


def test_a_skipped_learner_like_entry_exits_1_unless_allowed(course, tmp_path):
    """Nothing dropped silently: an unlisted Gradescope submission is listed, and exits 1."""
    src = tmp_path / "gs"
    (src / "submission_1").mkdir(parents=True)
    (src / "submission_2").mkdir()
    (src / "submission_1" / "work.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)   # no data.py: unreadable
    (src / "submission_2" / "data.py").write_text("x = 1\n")
    (src / "submission_metadata.yml").write_text("submission_1:\n  :submitters:\n  - :sid: '7'\n")
    db, out = str(tmp_path / "g.db"), tmp_path / "out"
    proc = grader("batch", EXERCISE, src, "--db", db, "--out", out, exercises=course["exercises"],
                  check_rc=1)
    assert "skipped submission_2: not listed in submission_metadata.yml" in proc.stdout
    assert "--allow-skipped" in proc.stderr
    assert json.loads((out / "batch.json").read_text())["skipped_entries"] == [
        {"entry": "submission_2", "reason": "not listed in submission_metadata.yml", "learner_like": True}]
    grader("batch", EXERCISE, src, "--db", db, "--allow-skipped", exercises=course["exercises"])


def test_the_progress_bar_says_it_is_starting_workers_until_the_first_grade(capsys):
    """The seconds before a worker is up (a local pool warming torch) are said, not a silent 0/N."""
    from types import SimpleNamespace

    from grader.course.batch import Tally, grade_into
    from grader.catalog.exercises import load_exercise

    shown = []

    class Starting:
        def describe(self):
            return "local pool of 2 worker processes"

        def run(self, tasks):
            shown.append(capsys.readouterr().err)  # what the bar says before any result
            return iter(())

        def close(self, cancel=False):
            pass

    sub = SimpleNamespace(id=1, learner="a", problem=None, files={})
    grade_into(None, load_exercise("day49-data"), "v", 1, [sub], Starting(), Tally(), batch_id=1,
               force=False, progress=True)
    assert "day49-data: starting workers (local pool of 2 worker processes)" in shown[0]
    assert "0/1" in shown[0]
