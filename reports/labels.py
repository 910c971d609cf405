"""Names people read for the ids of the grade: rules, symptoms, error kinds, evidence keys.

Each is an English msgid (marked with N_ for extraction) translated where it is shown.
"""

from __future__ import annotations

from grader.locale import N_, translate
from grader.models import SHIPPED_RULES

RULES = SHIPPED_RULES  # the shipped rules; exercises may declare more (grader.catalog.rules)

SYMPTOMS = {
    "nan-forward": N_("NaN on the first forward pass"),
    "nan-training": N_("NaN during training"),
    "loss-collapse": N_("the loss collapses"),
    "first-loss-off": N_("the first loss is off"),
    "future-leak": N_("future tokens leak"),
    "fp16-overflow": N_("fp16 overflow"),
    "softmax-overflow": N_("softmax overflow"),
    "shape-mismatch": N_("shape mismatch"),
    "value-mismatch": N_("value mismatch"),
    "exception": N_("exception"),
    "timeout": N_("timeout"),
    "memory-limit": N_("memory limit"),
}

ERRORS = {
    "timeout": N_("out of time"),
    "memory": N_("out of memory"),
    "crash": N_("the submission crashed"),
    "sandbox": N_("stopped by the sandbox"),
    "invalid-submission": N_("invalid submission"),
    # not an error kind of SPEC: an invalid-submission grade of a learner who handed in no file at
    # all (grader.intake.incoming.is_no_submission), counted apart in the class report and exports
    "no-submission": N_("no submission"),
}

# every key a check's fail(..., key=value) attaches (tests/test_i18n.py finds them all): a report
# shows none of them as a bare identifier beside translated ones
EVIDENCE = {
    "scale": N_("scale"),
    "row": N_("row"),
    "head": N_("head"),
    "step": N_("step"),
    "max_error": N_("largest error"),
    "tolerance": N_("tolerance"),
    "first_loss": N_("first loss"),
    "ln_v": N_("ln(V)"),
    "min_loss": N_("final loss"),
    "floor": N_("entropy floor"),
    "got": N_("got"),
    "expected": N_("expected"),
    "index": N_("index"),
    "position": N_("position"),
    "missing": N_("missing"),
    "extra": N_("unexpected"),
    "entropy": N_("entropy"),
    "chi2": N_("chi-square"),
    "bound": N_("bound"),
    "data": N_("data"),
    "start": N_("start"),
    "max_deviation": N_("largest deviation"),
    "call": N_("call"),
    "differ": N_("differing"),
    "held_out_loss": N_("held-out loss"),
    "input": N_("input"),
    "mean": N_("mean"),
    "std": N_("standard deviation"),
    "shape": N_("shape"),
}

# How the learner's code ran (Grade.isolation: stored as data, shown in the reader's language)
ISOLATION = {
    "bubblewrap": N_("bubblewrap"),
    "process": N_("process"),
    "none": N_("none"),
    "none (answers are data)": N_("none (answers are data)"),
}

# Evidence a report never shows: answer keys and hidden inputs, should a check ever attach them.
HIDDEN_EVIDENCE = frozenset(
    {"key", "answer", "answers", "expected_answer", "hidden_input", "inputs", "reference", "secret"}
)


def rule_label(rule: str, lang: str) -> str:
    from grader.catalog.rules import rule_title

    return rule_title(rule, lang)


def symptom_label(symptom: str, lang: str) -> str:
    return translate(SYMPTOMS.get(symptom, symptom), lang)


def error_label(kind: str, lang: str) -> str:
    return translate(ERRORS.get(kind, kind), lang)


def error_kind(grade) -> str | None:
    """The kind a report or export counts a grade's error under: its GradeError.kind, but
    "no-submission" for a learner who submitted no file (grader.intake.incoming.is_no_submission)."""
    from grader.intake.incoming import is_no_submission

    if grade.error is None:
        return None
    return "no-submission" if is_no_submission(grade) else grade.error.kind


def evidence_label(key: str, lang: str) -> str:
    return translate(EVIDENCE.get(key, key), lang)


def isolation_label(isolation: str, lang: str) -> str:
    return translate(ISOLATION.get(isolation, isolation), lang)
