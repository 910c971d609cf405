"""Quiz exercises: a learner's answers.toml graded against the key, question by question.

Answers are data: they are parsed by tomllib in the grader and compared by grader.answers (pure
functions). Nothing of the learner's runs, so quizzes need no jail.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, ValidationError

from grader.answers import (
    ChoiceQuestion,
    InfQuestion,
    IntegerQuestion,
    RealQuestion,
    check_answer,
    question_from_dict,
)
from grader.errors import ExerciseFileError, shown_path
from grader.exercises import exercise_dir, read_toml_model
from grader.locale import msg
from grader.models import CheckResult, Exercise, Rule, Title
from grader.variants import draw

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
    variant: str | None = None  # a generator in grader.variants: the key depends on the learner

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
        "\"ln(100)\", \"2/3\"; lists as [..]; choices as a letter.",
        f"# learner: {student}" if student else "# the default variant (no --student given)",
        "",
        "[answers]",
    ]
    for p in pose(exercise.id, student):
        lines.append(f"# {p.text_en}")
        lines.append(f"# {p.text_zh}")
        options = getattr(p.question, "options", None)
        if options:
            lines += [f"#   {letter}) {text}" for letter, text in options.items()]
        lines.append(f'{p.item.id} = ""')
        lines.append("")
    return "\n".join(lines)


def grade_answers(
    exercise: Exercise, answers_file: dict, student: str | None
) -> tuple[list[CheckResult], list[str]]:
    """(one check per question, warnings). Missing answers score zero; unknown ids are warnings."""
    answers = answers_file.get("answers", {})
    warnings: list[str] = []
    if not isinstance(answers, dict):
        answers = {}
        warnings.append(msg("answers.toml has no [answers] table"))
    posed = pose(exercise.id, student)
    known = {p.item.id for p in posed}
    unknown = sorted(set(answers) - known)
    if unknown:
        warnings.append(msg("unknown question ids ignored: {ids}", ids=", ".join(unknown)))
    missing = [p.item.id for p in posed if p.item.id not in answers or answers[p.item.id] == ""]
    if missing:
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
