"""Naming a failed check's bug: the mutant is its own fingerprint (DESIGN.md, principle 3).

When a check fails, the requests it made of the learner's code (grader.replay) are replayed on the
exercise's solution and on its mutants, in this process (they are the grader's own files); a
mutant whose answers match the learner's, where the solution's do not, is named, with the rule,
day and message of its TOML. Single mutants first; then the bug sets a starter is made of, and
pairs of mutants of an exercise with few, for a learner with more than one bug in one place.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from grader.limits import FINGERPRINT_NAMES, FINGERPRINT_SECONDS
from grader.models import Diagnosis
from grader.replay import (
    Event,
    Outcome,
    Trace,
    counterpart,
    distance,
    remembered_replay,
    replay,
    requests_digest,
    same,
)

PAIRED_MUTANTS = 10  # an exercise with at most this many mutants also has its pairs tried


@dataclass(frozen=True)
class Suspect:
    """A set of known bugs (usually one mutant) and the sources it makes of the solution."""

    mutants: tuple  # grader.mutants.Mutant, one or more
    files: dict

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(m.id for m in self.mutants)

    @property
    def key(self) -> str:
        digest = hashlib.sha256(repr(sorted(self.files.items())).encode()).hexdigest()[:16]
        return "+".join(m.id for m in self.mutants) + "/" + digest


class Namer:
    """Names the bugs of one submission's failed checks, within FINGERPRINT_SECONDS in all."""

    def __init__(self, exercise, trace: Trace, seconds: float = FINGERPRINT_SECONDS):
        from grader.exercises import exercise_dir

        self.exercise = exercise
        self.trace = trace
        self.deadline = time.monotonic() + seconds
        folder = exercise_dir(exercise.id) / "solution"
        self.solution = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))}
        self._suspects: list[list[Suspect]] | None = None
        self._digest: str | None = None  # of the requests of the check being named
        self.named: set[str] = set()  # the mutants named on this submission's checks so far

    def suspects(self) -> list[list[Suspect]]:
        """Rounds of suspects, tried in order until one round names someone."""
        if self._suspects is None:
            from grader.mutants import load_mutants, mutated_sources

            mutants = [m for m in load_mutants() if self.exercise.id in m.exercises]

            def suspect(group) -> Suspect | None:
                files: dict[str, str] | None = dict(self.solution)
                for m in group:
                    files = mutated_sources(m, self.exercise.id, files) if files is not None else None
                if files is None:
                    return None
                return Suspect(tuple(group), files)

            starter = [m for m in mutants if m.id in getattr(self.exercise, "starter_mutants", [])]
            sets = [c for n in range(2, len(starter) + 1) for c in itertools.combinations(starter, n)]
            pairs = list(itertools.combinations(mutants, 2)) if len(mutants) <= PAIRED_MUTANTS else []
            rounds: list[list[tuple]] = [[(m,) for m in mutants], sets, [p for p in pairs if p not in sets]]
            self._suspects = [[s for g in r if (s := suspect(g)) is not None] for r in rounds]
        return self._suspects

    def __call__(self, check: str) -> list[Diagnosis]:
        """The diagnoses naming the bug behind a failed check (none when nothing matches)."""
        events = [e for e in self.trace.events(check) if e.outcome is not None or e.op == "load"]
        learner = [e.outcome for e in events]
        if not any(o is not None and o.kind != "opaque" for o in learner) or self._late():
            return []
        self._digest = requests_digest(events)
        solution = self._replay(events, Suspect((), self.solution), learner=None)
        if solution is None or all(_agree(a, b) for a, b in zip(learner, solution, strict=True)):
            return []  # the learner's answers are the solution's: this check failed on something else
        for suspects in self.suspects():
            found: list[tuple[Suspect, float]] = []
            for suspect in suspects:
                if self._late():
                    # a round cut short could name a bug that a suspect not yet tried explains
                    # better: name none rather than a wrong one (a busy machine never misnames)
                    return []
                if any(f.ids < suspect.ids for f, _ in found):
                    continue  # a smaller set already explains it
                outcomes = self._replay(events, suspect, learner)
                if (
                    outcomes is not None
                    and len(outcomes) == len(events)
                    and all(_agree(a, b) for a, b in zip(learner, outcomes, strict=True))
                    and not all(_agree(a, b) for a, b in zip(solution, outcomes, strict=True))
                ):
                    found.append(
                        (suspect, sum(_distance(a, b) for a, b in zip(learner, outcomes, strict=True)))
                    )
            if found:
                # several bugs answer alike here: those already named on other checks explain it
                # best (one bug behind many failures), e.g. a NaN training curve that any bug
                # making NaN logits matches
                known = [f for f in found if f[0].ids <= self.named]
                found = sorted(known or found, key=lambda f: f[1])
                named = {m.id: m for suspect, _ in found for m in suspect.mutants}
                # a bug is told once, by the first check that found it (the report lists the
                # checks a root cause breaks)
                fresh = [m for m in named.values() if m.id not in self.named]
                self.named |= set(named)
                return [_diagnosis(m, check) for m in fresh][:FINGERPRINT_NAMES]
        return []

    def _late(self) -> bool:
        return time.monotonic() > self.deadline

    def _replay(self, events: Sequence[Event], suspect: Suspect, learner) -> list[Outcome] | None:
        modules = counterpart(suspect.files, f"{self.exercise.id}/{suspect.key}")
        if modules is None:
            return None

        def differs(i: int, outcome: Outcome) -> bool:
            return learner is not None and not _agree(learner[i], outcome)

        seconds = self.deadline - time.monotonic()
        try:
            if self._digest is None:
                return replay(events, modules, until=differs, seconds=seconds)
            # the same requests replayed on the same mutant answer alike for every learner
            key = (f"{self.exercise.id}/{suspect.key}", self._digest)
            return remembered_replay(key, events, modules, until=differs, seconds=seconds)
        except TimeoutError:
            return None


def _agree(learner: Outcome | None, other: Outcome) -> bool:
    if learner is None:  # a load: nothing to compare
        return True
    return same(learner, other)


def _distance(learner: Outcome | None, other: Outcome) -> float:
    return 0.0 if learner is None else distance(learner, other)


def _diagnosis(mutant, check: str) -> Diagnosis:
    return Diagnosis(
        rule=mutant.rule,
        day=mutant.day,
        mutant=mutant.id,
        check=check,
        message=mutant.message.en,
        message_i18n={"en": mutant.message.en, "zh-TW": mutant.message.zh_TW},
    )
