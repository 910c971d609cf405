"""Batch input that cannot be mistaken or impersonated (issue 31): a SOURCE that is no class, or
another exercise's class, is refused (exit 2, nothing written) unless --force; a Moodle
participant id comes from the end of a folder's name only. Nothing here grades: a refused batch
grades nothing (the forced batch, and the working folder it leaves, are in
test_batch_sources.py's test_a_batch_refuses_the_wrong_exercise_...)."""

from __future__ import annotations

from pathlib import Path

from grader.catalog.exercises import all_exercises, load_exercise
from grader.intake.sources import class_verdict, read_source
from tests.adversarial.classes import CODE, write
from tests.test_batch import ROOT, grader

DATA = load_exercise("day49-data")  # one file: data.py
EXERCISES = ROOT / "exercises"


def verdict(src: Path):
    found = read_source(src, DATA)
    return found, class_verdict(found, DATA, all_exercises())


def test_system_folders_are_no_class(tmp_path):
    src = write(tmp_path / "ssl", {"certs/ca.pem": "-----BEGIN", "certs/b.pem": "x", "openssl.cnf": "[x]"})
    (src / "private").mkdir()
    _, why = verdict(src)
    assert str(why) == ("SOURCE does not look like a class of day49-data: none of its 2 learners "
                        "(certs, private) holds any of its files (data.py)")


def test_one_learners_folder_is_no_class_but_a_class_of_one_is(tmp_path):
    s003 = write(tmp_path / "class" / "s003", {"data.py": CODE, "notes.txt": "x"})
    found, why = verdict(s003)
    assert [i.learner for i in found.incoming] == ["data"]       # what a batch would have made
    assert "SOURCE looks like one learner's submission, not a class: it holds data.py itself" in str(why)
    assert verdict(tmp_path / "class")[1] is None                # the class folder: learner s003
    flat = write(tmp_path / "flat", {"alice.py": CODE, "bob.py": CODE, "carol.py": CODE})
    assert verdict(flat)[1] is None                              # a file per learner: named after them


def test_a_class_of_notebooks_is_not_another_exercises(tmp_path):
    import json

    solution = (EXERCISES / "day49-data" / "solution" / "data.py").read_text()
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": solution}
    nb = json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    src = write(tmp_path / "nbs", {f"{n}/work.ipynb": nb for n in ("ann", "ben", "cat")})
    found, why = verdict(src)
    assert all("data.py" in i.files for i in found.incoming) and why is None


def test_the_wrong_exercise_is_refused_and_nothing_is_written(tmp_path):
    src = write(tmp_path / "cls", {f"{n}/{f}": "x = 1\n" for n in ("a", "b", "c")
                                   for f in ("bughunt.py", "diagnosis.toml")})
    db, out = tmp_path / "g.db", tmp_path / "out"
    proc = grader("batch", "day49-data", src, "--db", db, "--out", out, exercises=EXERCISES, check_rc=2)
    assert ("error: day49-data may be the wrong exercise: 3 of 3 learners handed in none of its files "
            "(data.py); 3 of them hold files of day49-bughunt (bughunt.py, diagnosis.toml); nothing was "
            "graded or written (pass --force to grade it all the same)") in proc.stderr
    assert not out.exists() and not list(tmp_path.glob("g.db*"))
    proc = grader("batch", "day49-data", src, "--dry-run", exercises=EXERCISES, check_rc=2)
    assert "  a\n" in proc.stdout and "WARNING: day49-data may be the wrong exercise" in proc.stdout
    for system in ("/etc/ssl",) if Path("/etc/ssl/certs").is_dir() else ():
        proc = grader("batch", "day49-data", system, "--db", db, "--out", out, exercises=EXERCISES,
                      check_rc=2)
        assert "does not look like a class of day49-data" in proc.stderr and not out.exists()


# -- Moodle: whose folder is it ------------------------------------------------------------------

BOB = "Bob Ray_222_assignsubmission_file_"
MALLORY = "Mallory_222_assignsubmission_file__111_assignsubmission_file_"  # display name chosen to fool


def test_a_moodle_display_name_cannot_claim_another_participant(tmp_path):
    src = write(tmp_path / "moodle", {
        f"{BOB}/data.py": "bob = 1\n",
        f"{MALLORY}/data.py": "mallory = 1\n",
        "Mallory_222_assignsubmission_file__111_assignsubmission_onlinetext_/onlinetext.html": "<p/>",
    })
    found = read_source(src, DATA)
    by_id = {i.learner: i for i in found.incoming}
    assert sorted(by_id) == ["111", "222"]
    assert by_id["222"].files["data.py"] == b"bob = 1\n" and by_id["222"].name == "Bob Ray"
    assert by_id["111"].files["data.py"] == b"mallory = 1\n"
    assert by_id["111"].name == "Mallory_222_assignsubmission_file_"
    assert by_id["111"].problem is None and by_id["222"].problem is None


def test_a_flat_moodle_file_naming_two_participants_is_skipped_saying_why(tmp_path):
    src = write(tmp_path / "moodle", {
        f"{BOB}data.py": "bob = 1\n",
        f"{MALLORY}data.py": "mallory = 1\n",
    })
    found = read_source(src, DATA)
    assert [(i.learner, i.files["data.py"]) for i in found.incoming] == [("222", b"bob = 1\n")]
    (note,) = found.notes
    assert note.entry == f"{MALLORY}data.py" and note.learner_like
    assert str(note.reason).startswith("names more than one Moodle participant (222, 111)")


def test_two_folders_claiming_one_participant_are_both_reported_and_neither_graded_as_it(tmp_path):
    src = write(tmp_path / "moodle", {
        f"{BOB}/data.py": "bob = 1\n",
        "Bobby_222_assignsubmission_file_/data.py": "bobby = 1\n",
        "Cy Ho_9_assignsubmission_file_/data.py": "cy = 1\n",
    })
    found = read_source(src, DATA)
    by_id = {i.learner: i for i in found.incoming}
    assert by_id["222"].files == {} and by_id["9"].problem is None
    assert str(by_id["222"].problem).startswith(
        f"{BOB}, Bobby_222_assignsubmission_file_ all claim Moodle participant 222")
    assert sorted(n.entry for n in found.notes) == [BOB, "Bobby_222_assignsubmission_file_"]
    proc = grader("batch", "day49-data", src, "--dry-run", exercises=EXERCISES, check_rc=1)
    assert "all claim Moodle participant 222" in proc.stdout and "--allow-skipped" in proc.stderr
