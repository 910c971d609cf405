"""Quiz sheets as learners hand them in (issue 14): a misspelled or missing [answers] table, a
typo in a question id, a `# learner:` header, and a sheet that is not TOML at all."""
import pytest

from grader.course.batch import exercise_version, grade_task
from grader.errors import UsageError
from grader.grading.grade import grade
from grader.catalog.quiz import answers_table, pose, sheet_learner, variant_learner

QUIZ = "day49-quiz"


def sheet(tmp_path, text, name="answers.toml"):
    folder = tmp_path / "sub"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def graded(tmp_path, text, student=None, quiz=QUIZ):
    result = grade(quiz, sheet(tmp_path, text), student=student).model_dump(mode="json")
    checks = {c["id"]: c for c in result["checks"]}
    return result, checks, [w["message"] for w in result["warnings"]]


@pytest.mark.parametrize("header", ["[Answers]", "[answer]", "[ANSWERS]", "[answrs]"])
def test_a_misspelled_answers_table_is_read_and_named(tmp_path, header):
    _, checks, warnings = graded(tmp_path, f'{header}\nshapes_d_k = 4\nxy_x = "[502, 1204, 33, 991]"\n')
    assert checks["shapes_d_k"]["passed"] and checks["xy_x"]["passed"]
    assert any(f"{header} was read as [answers]" in w for w in warnings), warnings


def test_answers_without_a_table_are_read_with_a_warning(tmp_path):
    _, checks, warnings = graded(tmp_path, "# learner sheet\nshapes_d_k = 4\n")
    assert checks["shapes_d_k"]["passed"]
    assert any("no [answers] table; the answers outside any table were read" in w for w in warnings)


def test_a_sheet_with_no_answers_at_all_says_why(tmp_path):
    result, _, warnings = graded(tmp_path, "[notes]\ntext = 'I ran out of time'\n")
    assert result["score"] == 0
    assert any("no [answers] table, so no answer was read" in w for w in warnings), warnings


def test_an_unknown_question_id_suggests_the_closest(tmp_path):
    text = "[answers]\nshapes_dk = 4\nXY_X = [502, 1204, 33, 991]\nzzz = 1\nshapes_d_k = 4\n"
    _, checks, warnings = graded(tmp_path, text)
    assert checks["shapes_d_k"]["passed"] and not checks["xy_x"]["passed"]  # suggested, not guessed
    assert "unknown question id 'shapes_dk' ignored: did you mean shapes_d_k?" in warnings
    assert "unknown question id 'XY_X' ignored: did you mean xy_x?" in warnings
    assert "unknown question id 'zzz' ignored" in warnings


def test_answers_table_as_a_pure_function():
    assert answers_table({"answers": {"a": 1}}, ["a"]) == ({"a": 1}, [])
    table, warnings = answers_table({"answers": 3}, ["a"])
    assert table == {} and "must be a table" in warnings[0]


VARIANT = "variant_mha_params"  # day45-quiz: its key depends on the learner


def variant_key(student):
    return next(p.question.key.value for p in pose("day45-quiz", student) if p.item.id == VARIANT)


def test_the_sheet_header_names_the_learner():
    assert sheet_learner("# Day 45 quiz\n# Write each answer...\n# learner: alice\n\n[answers]\n") == "alice"
    assert sheet_learner("# the default variant (no --student given)\n[answers]\n") is None
    assert variant_learner(None, None) == (None, [])
    assert variant_learner("alice", "alice") == ("alice", [])


def test_graded_without_student_a_header_picks_that_learners_variant_with_a_note(tmp_path):
    assert variant_key("alice") != variant_key(None)
    text = f"# learner: alice\n[answers]\n{VARIANT} = {variant_key('alice')}\n"
    _, checks, warnings = graded(tmp_path, text, quiz="day45-quiz")
    assert checks[VARIANT]["passed"]
    assert any("variant of learner alice" in w and "no --student" in w for w in warnings), warnings


def test_a_header_that_disagrees_with_student_is_a_warning_naming_both(tmp_path):
    text = f"# learner: alice\n[answers]\n{VARIANT} = {variant_key('bob')}\n"
    _, checks, warnings = graded(tmp_path, text, student="bob", quiz="day45-quiz")
    assert checks[VARIANT]["passed"]  # --student decides the variant
    assert any("alice" in w and "bob" in w for w in warnings), warnings
    _, checks, warnings = graded(tmp_path, text, student="alice", quiz="day45-quiz")
    assert not any("learner" in w for w in warnings), warnings


MALFORMED = '[answers]\nshapes_d_k = 4\nxy_x = 43x\n'


def test_grade_refuses_a_malformed_sheet_with_file_line_and_column(tmp_path):
    with pytest.raises(UsageError) as raised:
        grade(QUIZ, sheet(tmp_path, MALFORMED))
    assert "answers.toml" in str(raised.value) and "line 3, column" in str(raised.value)


def test_a_batch_or_server_stores_a_malformed_sheet_as_0_with_its_location():
    # the server's dispatcher runs the same grade_task (grader/service/dispatch.py)
    task = {"exercise": QUIZ, "learner": "carol", "submission_id": 7, "version": exercise_version(QUIZ),
            "files": {"answers.toml": MALFORMED.encode()}}
    out = grade_task(task)
    assert out["status"] == "unreadable", out
    grade_ = out["grade"]
    assert grade_["score"] == 0 and grade_["error"]["kind"] == "invalid-submission"
    assert "answers.toml" in grade_["error"]["message"] and "line 3, column" in grade_["error"]["message"]
