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
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from grader.limits import FINGERPRINT_NAMES, FINGERPRINT_SECONDS
from grader.locale import msg
from grader.models import Diagnosis
from grader.replay import Event, Outcome, Trace, counterpart, distance, replay, same
from grader.testkit import is_close

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
        solution = self._replay(events, Suspect((), self.solution), learner=None)
        if solution is None or all(_agree(a, b) for a, b in zip(learner, solution, strict=True)):
            return []  # the learner's answers are the solution's: this check failed on something else
        for suspects in self.suspects():
            found: list[tuple[Suspect, float]] = []
            for suspect in suspects:
                if self._late():
                    break
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
                found.sort(key=lambda f: f[1])
                named = {m.id: m for suspect, _ in found for m in suspect.mutants}
                return [_diagnosis(m, check) for m in named.values()][:FINGERPRINT_NAMES]
        return []

    def _late(self) -> bool:
        return time.monotonic() > self.deadline

    def _replay(self, events: Sequence[Event], suspect: Suspect, learner) -> list[Outcome] | None:
        modules = counterpart(suspect.files, f"{self.exercise.id}/{suspect.key}")
        if modules is None:
            return None

        def differs(i: int, outcome: Outcome) -> bool:
            return learner is not None and not _agree(learner[i], outcome)

        try:
            return replay(events, modules, until=differs, seconds=self.deadline - time.monotonic())
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


# -- known bugs as functions (being replaced by the mutants themselves) ------------------------


@dataclass(frozen=True)
class AttentionVariant:
    scale_name: str  # "1/sqrt(d_k)" is right
    scale: float
    mask: str  # "diagonal=1" is right; "diagonal=0" blocks the diagonal; "none"

    @property
    def correct_scale(self) -> bool:
        return self.scale_name == "1/sqrt(d_k)"

    @property
    def correct_mask(self) -> bool:
        return self.mask == "diagonal=1"


def scale_candidates(d_k: int, d_model: int) -> dict[str, float]:
    names = {
        "1/sqrt(d_k)": 1 / math.sqrt(d_k),
        "1/d_model": 1 / d_model,
        "1/d_k": 1 / d_k,
        "1 (no scaling)": 1.0,
        "1/sqrt(d_model)": 1 / math.sqrt(d_model),
        "sqrt(d_k) (multiplied)": math.sqrt(d_k),
    }
    unique: dict[str, float] = {}
    for name, value in names.items():  # d_k = d_model collapses some candidates
        if all(abs(value - v) > 1e-12 for v in unique.values()):
            unique[name] = value
    return unique


def causal_attention(q, k, v, scale: float, mask: str) -> torch.Tensor:
    """Plain-softmax causal attention with a chosen scale and mask, as a learner would write it."""
    q, k, v = q.double(), k.double(), v.double()
    T_q, T_k = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) * scale
    if mask != "none":
        diagonal = 1 if mask == "diagonal=1" else 0
        blocked = torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=diagonal)
        scores = scores.masked_fill(blocked, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def identify_attention(actual: torch.Tensor, q, k, v, d_model: int, tol: float) -> AttentionVariant | None:
    """Which (scale, mask) makes causal attention produce `actual`? NaN rows must agree too."""
    d_k = q.size(-1)
    for scale_name, scale in scale_candidates(d_k, d_model).items():
        for mask in ("diagonal=1", "diagonal=0", "none"):
            expected = causal_attention(q, k, v, scale, mask)
            if _same_with_nan(actual, expected, tol):
                return AttentionVariant(scale_name, scale, mask)
    return None


def _same_with_nan(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> bool:
    a, e = actual.double(), expected.double()
    if a.shape != e.shape:
        return False
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if not torch.equal(nan_a, nan_e):
        return False
    return is_close(torch.where(nan_a, 0.0, a), torch.where(nan_e, 0.0, e), tol)


def estimate_scale(actual: torch.Tensor, q, k, v) -> float | None:
    """The scale s in softmax(s q.k) implied by a causal row that attends to two keys.

    Row 1 of causal attention mixes v0 and v1 with weights w and 1-w, where
    w / (1-w) = exp(s (q1.k0 - q1.k1)). Recover w from the output by least squares, then s.
    """
    q, k, v, out = q.double(), k.double(), v.double(), actual.double()
    q1, k0, k1, v0, v1, o = (
        q[..., 1, :],
        k[..., 0, :],
        k[..., 1, :],
        v[..., 0, :],
        v[..., 1, :],
        out[..., 1, :],
    )
    direction = v0 - v1
    w = ((o - v1) * direction).sum(-1) / (direction * direction).sum(-1)  # o = v1 + w (v0 - v1)
    gap = (q1 * (k0 - k1)).sum(-1)
    ok = (w > 1e-6) & (w < 1 - 1e-6) & (gap.abs() > 1e-3)
    if not ok.any():
        return None
    s = torch.log(w[ok] / (1 - w[ok])) / gap[ok]
    return float(s.median())


def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x.double(), (x.size(-1),), weight.double(), bias.double(), eps)


SCALE_MUTANTS = {
    "1/d_model": "scale-by-d-model",
    "1 (no scaling)": "no-scale",
    "1/sqrt(d_model)": "scale-by-sqrt-d-model",
}


def name_scale(scale: float, d_k: int, d_model: int, rel: float = 0.02) -> str | None:
    """The candidate a measured scale is (within `rel`), e.g. "1/d_model"; None if none is."""
    for name, value in scale_candidates(d_k, d_model).items():
        if abs(scale - value) <= rel * value:
            return name
    return None


def scale_label(name: str):
    """A scale candidate's name as a learner reads it (two of them hold words to translate)."""
    if name == "1 (no scaling)":
        return msg("1 (no scaling)")
    if name == "sqrt(d_k) (multiplied)":
        return msg("sqrt(d_k) (multiplied)")
    return name


def describe_scale(scale: float, d_k: int, d_model: int):
    """A learner-facing sentence about a measured attention scale, and the mutant it names.

    The message's `params["finding"]` is its first sentence (what the diagnosis shows).
    """
    name = name_scale(scale, d_k, d_model)
    shown = f"1/{1 / scale:.3g}" if scale < 1 else f"{scale:.3g}"
    values = dict(shown=shown, sqrt_d_k=math.sqrt(d_k), d_k=d_k, d_model=d_model)
    if name and not name.startswith("1 ("):
        finding = msg(
            "your scores are scaled by {shown} = {name}; expected 1/sqrt(d_k) = "
            "1/{sqrt_d_k:.3g} (d_k = {d_k}, d_model = {d_model})",
            name=scale_label(name),
            **values,
        )
    elif name:
        finding = msg(
            "your scores are scaled by {shown} (no scaling at all); expected 1/sqrt(d_k) "
            "= 1/{sqrt_d_k:.3g} (d_k = {d_k}, d_model = {d_model})",
            **values,
        )
    else:
        finding = msg(
            "your scores are scaled by {shown}; expected 1/sqrt(d_k) = 1/{sqrt_d_k:.3g} "
            "(d_k = {d_k}, d_model = {d_model})",
            **values,
        )
    text = msg(
        "{finding}. Scores divided by too much make attention too flat; not divided, they "
        "saturate the softmax.",
        finding=finding,
    )
    return text, SCALE_MUTANTS.get(name or "")


def guarded_causal_attention(q, k, v, scale: float, mask: str) -> torch.Tensor:
    """Like causal_attention, but fully blocked rows give 0 instead of NaN (a stable softmax)."""
    out = causal_attention(q, k, v, scale, mask)
    return torch.nan_to_num(out, nan=0.0)
