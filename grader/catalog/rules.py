"""The rule catalog: the shipped rules (grader.models.SHIPPED_RULES) and those exercises declare
in their exercise.toml `[[rules]]`. Which rules a check may use, and a rule's title in a language."""

from __future__ import annotations

from functools import cache

from grader.catalog.exercises import all_exercises
from grader.errors import GraderError
from grader.locale import translate
from grader.models import SHIPPED_RULES, DeclaredRule, Exercise


def exercise_rules(exercise: Exercise) -> list[str]:
    """The rule ids this exercise's checks and mutants may use: the shipped ones, then its own."""
    return [*SHIPPED_RULES, *(r.id for r in exercise.rules)]


@cache
def declared_rules() -> dict[str, DeclaredRule]:
    """Every rule the exercises declare, by id (the first exercise's, should two declare one)."""
    try:
        exercises = all_exercises()
    except GraderError:  # a report still renders when one exercise.toml is broken
        return {}
    found: dict[str, DeclaredRule] = {}
    for exercise in exercises:
        for rule in exercise.rules:
            found.setdefault(rule.id, rule)
    return found


def all_rules() -> list[str]:
    """Every rule id, shipped first, then the declared ones in the exercises' order."""
    return [*SHIPPED_RULES, *(r for r in declared_rules() if r not in SHIPPED_RULES)]


def rule_title(rule: str, lang: str) -> str:
    """A rule's title in `lang`: a shipped rule's through the catalogs, a declared one's from its
    exercise.toml; an id no one knows (a stored grade of an exercise since removed) as itself."""
    if rule in SHIPPED_RULES:
        return translate(SHIPPED_RULES[rule], lang)
    declared = declared_rules().get(rule)
    return declared.title.text(lang) if declared else rule
