"""Quiz exercises: a learner's answers.toml graded against the key, question by question.

Answers are data: they are parsed by tomllib in the grader and compared by grader.catalog.answers (pure
functions). Nothing of the learner's runs, so quizzes need no jail.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from functools import cache

from pydantic import BaseModel, ConfigDict, ValidationError

from grader.catalog.answers import (
    ChoiceQuestion,
    InfQuestion,
    IntegerQuestion,
    RealQuestion,
    check_answer,
    question_from_dict,
)
from grader.catalog.exercises import exercise_dir, read_toml_model
from grader.catalog.variants import draw, draw_params
from grader.errors import ExerciseFileError, UsageError, shown_path
from grader.intake.submission import SubmittedFiles
from grader.locale import Message, msg
from grader.models import CheckResult, Exercise, Rule, Title

CHECK_FIELDS = {"rule", "day", "text", "points", "variant"}


class QuizQuestion(BaseModel):
    """One entry of key.toml: the check it is, its text, and the answer engine's fields."""

    model_config = ConfigDict(extra="allow")

    id: str
    kind: str
    rule: Rule = "quiz"
    day: int
    points: float = 1.0
    text: Title
    variant: str | None = None  # a generator in grader.catalog.variants: the key depends on the learner

    def engine_fields(self) -> dict:
        return {k: v for k, v in self.model_dump(by_alias=True).items() if k not in CHECK_FIELDS}


ENGINES = {
    cls.model_fields["kind"].default: cls
    for cls in (IntegerQuestion, RealQuestion, InfQuestion, ChoiceQuestion)
}


class AnswerKey(BaseModel):
    """An exercise's key.toml. Unknown keys are errors, in a question too (load_key checks those
    against the question's kind)."""

    model_config = ConfigDict(extra="forbid")

    questions: list[QuizQuestion]


class PosedQuestion(BaseModel):
    """A question as one learner sees it: variant parameters filled in, its key computed."""

    item: QuizQuestion
    text_en: str
    text_zh: str
    question: IntegerQuestion | RealQuestion | InfQuestion | ChoiceQuestion


def key_path(exercise_id: str):
    return exercise_dir(exercise_id) / "key.toml"


@cache
def load_key(exercise_id: str) -> tuple[QuizQuestion, ...]:
    path = key_path(exercise_id)
    key = read_toml_model(path, AnswerKey)
    for n, item in enumerate(key.questions, 1):
        engine = ENGINES.get(item.kind)
        if engine is None:
            raise ExerciseFileError(
                f"{shown_path(path)}: [[questions]] #{n} ({item.id}): unknown kind "
                f"{item.kind!r}; known kinds: {', '.join(sorted(ENGINES))}"
            )
        known = set(QuizQuestion.model_fields) | set(engine.model_fields)
        unknown = sorted(set(item.model_extra or {}) - known)
        if unknown:
            raise ExerciseFileError(
                f"{shown_path(path)}: [[questions]] #{n} ({item.id}): unknown key "
                f"{unknown[0]!r}; known keys: {', '.join(sorted(known))}"
            )
    return tuple(key.questions)


def _question(exercise_id: str, item: QuizQuestion, fields: dict):
    try:
        return question_from_dict(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'][1:])) or item.kind}: {e['msg']}" for e in exc.errors()
        )
        raise ExerciseFileError(
            f"{shown_path(key_path(exercise_id))}: [[questions]] {item.id}: {problems}"
        ) from None


def pose(exercise_id: str, student: str | None) -> list[PosedQuestion]:
    """Every question of the quiz for this learner (no id: the default variant)."""
    posed = []
    for item in load_key(exercise_id):
        fields = item.engine_fields()
        params: dict = {}
        if item.variant:
            params, key = draw(item.variant, student or "", exercise_id, item.id)
            fields["answer"] = key
        posed.append(
            PosedQuestion(
                item=item,
                text_en=item.text.en.format(**params),
                text_zh=item.text.zh_TW.format(**params),
                question=_question(exercise_id, item, fields),
            )
        )
    return posed


def starter_text(exercise: Exercise, student: str | None) -> str:
    lines = [
        f"# {exercise.title.en} / {exercise.title.zh_TW}",
        "# Write each answer after its '='. Numbers may be 4194304, 4_194_304, \"4,194,304\", "
        "\"ln(100)\", \"2/3\"; lists and shapes as [2, 3], \"(2, 3)\" or \"2x3\"; choices as a letter.",
        f"# learner: {student}" if student else "# the default variant (no --student given)",
        "",
        "[answers]",
    ]
    # the questions' texts only, never their keys: a variant's key imports torch, and the grading
    # server's web process makes starters (tests/test_server_edge.py holds it torch-free)
    for item in load_key(exercise.id):
        params = draw_params(item.variant, student or "", exercise.id, item.id) if item.variant else {}
        lines.append(f"# {item.text.en.format(**params)}")
        lines.append(f"# {item.text.zh_TW.format(**params)}")
        options = item.engine_fields().get("options")
        if isinstance(options, dict) and options:
            lines += [f"#   {letter}) {text}" for letter, text in options.items()]
        lines.append(f'{item.id} = ""')
        lines.append("")
    return "\n".join(lines)


# the line starter_text writes: "# learner: alice" (an id as the course writes them, capped)
LEARNER_LINE = re.compile(r"^#\s*learner:\s*(?P<id>[\w.@+-]{1,100})\s*$", re.MULTILINE | re.ASCII)
ANSWERS_TABLE = "answers"


def sheet_learner(text: str) -> str | None:
    """The learner a sheet's `# learner: ID` header names (in its first lines), or None."""
    head = "\n".join(text.splitlines()[:20])
    m = LEARNER_LINE.search(head)
    return m["id"] if m else None


def answers_table(sheet: dict, known: Sequence[str]) -> tuple[dict, list[Message]]:
    """The learner's `[answers]` table and what to warn about: a misspelled table ([Answers],
    [answer]) is read, with a warning; so are question ids written above every table (the
    `[answers]` line deleted). Without either, nothing is answered and the warning says why."""
    table = sheet.get(ANSWERS_TABLE)
    if isinstance(table, dict):
        return table, []
    if table is not None:
        return {}, [msg("answers.toml: answers must be a table, [answers], with one line per question")]
    tables = [k for k, v in sheet.items() if isinstance(v, dict)]
    close = [k for k in tables if k.casefold() in ("answers", "answer")]
    close += difflib.get_close_matches(ANSWERS_TABLE, [k for k in tables if k not in close], n=1, cutoff=0.7)
    if close:
        name = close[0]
        warning = msg(
            "answers.toml has no [answers] table; [{name}] was read as [answers]: name the table [answers]",
            name=name,
        )
        return sheet[name], [warning]
    loose = {k: v for k, v in sheet.items() if k in known}
    if loose:
        warning = msg("answers.toml has no [answers] table; the answers outside any table were read")
        return loose, [warning]
    return {}, [
        msg("answers.toml has no [answers] table, so no answer was read: write the answers under [answers]")
    ]


def unknown_ids(answers: dict, known: Sequence[str]) -> list[Message]:
    """A warning for each key that is no question id (the first ten), with the closest id."""
    lowered = {k.casefold(): k for k in known}
    warnings = []
    unknown = sorted(k for k in answers if k not in known)
    for key in unknown[:10]:
        closest = (
            [lowered[key.casefold()]]
            if key.casefold() in lowered
            else difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        )
        if closest:
            warnings.append(
                msg(
                    "unknown question id {id} ignored: did you mean {closest}?",
                    id=repr(key),
                    closest=closest[0],
                )
            )
        else:
            warnings.append(msg("unknown question id {id} ignored", id=repr(key)))
    if len(unknown) > 10:
        warnings.append(msg("and {n} more unknown question ids ignored", n=len(unknown) - 10))
    return warnings


def variant_learner(student: str | None, header: str | None) -> tuple[str | None, list[Message]]:
    """Whose variant to grade, and the note that says so. --student wins over the sheet's header
    (a header that disagrees is a warning naming both: a copied sheet shows); without --student,
    the learner the header names, never silently the default variant."""
    if header is None or header == student:
        return student, []
    if student is None:
        note = msg(
            "graded as the variant of learner {header}, whom the sheet's '# learner: {header}' line names "
            "(no --student given)",
            header=header,
        )
        return header, [note]
    warning = msg(
        "the sheet's '# learner: {header}' line names another learner than --student {student}: "
        "graded as {student}'s variant",
        header=header,
        student=student,
    )
    return student, [warning]


def grade_sheet(
    exercise: Exercise, submitted: SubmittedFiles, student: str | None
) -> tuple[list[CheckResult], list[Message]]:
    """A quiz's one file as read_submission found it. A sheet that does not parse raises
    UsageError with its file, line and column: `grader grade` exits 2, a batch or a server
    stores a grade of 0 that names them (batch.grade_task)."""
    name = exercise.files[0]
    problem = submitted.problems.get(name)  # read_submission raises first today; kept as the rule
    if problem is not None:
        raise UsageError(problem)
    text = submitted.files.get(name, b"").decode("utf-8", "replace")
    return grade_answers(exercise, submitted.toml.get(name, {}), student, header=sheet_learner(text))


def grade_answers(
    exercise: Exercise, answers_file: dict, student: str | None, header: str | None = None
) -> tuple[list[CheckResult], list[Message]]:
    """(one check per question, warnings). Missing answers score zero; unknown ids are warnings.
    header: the learner the sheet's `# learner:` line names (variant_learner decides)."""
    learner, warnings = variant_learner(student, header)
    posed = pose(exercise.id, learner)
    known = [p.item.id for p in posed]
    answers, problems = answers_table(answers_file, known)
    warnings += problems + unknown_ids(answers, known)
    missing = [p.item.id for p in posed if p.item.id not in answers or answers[p.item.id] == ""]
    if missing and answers:
        warnings.append(msg("no answer given for: {ids}", ids=", ".join(missing)))
    checks = []
    for p in posed:
        message: str
        raw = answers.get(p.item.id)
        if raw is None or raw == "":
            passed, message = False, msg("no answer given")
        else:
            result = check_answer(p.question, raw)
            passed, message = result.passed, result.message
        checks.append(
            CheckResult(
                id=p.item.id,
                passed=passed,
                points=p.item.points if passed else 0.0,
                max_points=p.item.points,
                rule=p.item.rule,
                day=p.item.day,
                title=p.text_en,
                title_i18n={"zh-TW": p.text_zh},
                message=message if not passed else "",
            )
        )
    return checks, warnings
