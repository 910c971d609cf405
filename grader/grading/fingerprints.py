"""Naming a submission's bugs: the smallest set of known bugs that reproduces every failing call.

The mutant is its own fingerprint (DESIGN.md, principle 3). Once every check has run, the requests
the failed checks made of the learner's code (grader.grading.replay) are replayed, in this process, on the
exercise's solution and on sets of its known bugs applied together (trusted code: the grader's
own files). One explanation is sought for the whole submission (docs/diagnosis.md):

1. the smallest sets of known bugs whose answers equal the learner's on *every* recorded request
   of the failed checks, and on those of the passing checks too: singles, then pairs and triples
   (and the bug sets a bug hunt's starter is made of). Pairs and triples are tried only among the
   bugs that alone change some request the learner's code got wrong and none it got right (what
   localizes the bugs: the requests, hence the functions, each one reaches);
2. when several sets reproduce alike, inputs that tell them apart (a default flag passed, one
   more batch row, fresh values) are run on each and, where they differ, on the learner's own
   code in the jail: the sets the learner does not match are dropped;
3. what every remaining set holds is a fact ("reproduced"); what only some hold, a candidate;
   with no set at all, where the difference starts ("localized": the innermost function whose
   calls differ, and its smallest failing call).

All of it within FINGERPRINT_SECONDS; a search cut short names nothing it has not proven.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from grader.grading.replay import (
    Event,
    Outcome,
    Trace,
    counterpart,
    handles_in,
    remembered_replay,
    replay,
    replay_seconds,
    requests_digest,
    same,
)
from grader.limits import FINGERPRINT_CANDIDATES, FINGERPRINT_NAMES, FINGERPRINT_SECONDS
from grader.locale import msg
from grader.models import CheckResult, Diagnosis

LARGEST_SET = 3  # pairs and triples of known bugs are tried; a starter's own set may be larger
PAIRING_REQUESTS = 3  # of each failed check's requests answered wrong, those bugs are paired on
COSTLY_SECONDS = 0.2  # a check whose requests take longer to replay (on the solution) is costly

# runs a sequence of requests on the learner's code (the jail): one Outcome per request, or None
# when the jail could not answer them all
Rerun = Callable[[list[Event], float], "list[Outcome] | None"]


@dataclass(frozen=True)
class Suspect:
    """A set of known bugs and the sources it makes of the solution."""

    mutants: tuple  # grader.catalog.mutants.Mutant, zero or more
    files: dict

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(m.id for m in self.mutants)

    @property
    def key(self) -> str:
        digest = hashlib.sha256(repr(sorted(self.files.items())).encode()).hexdigest()[:16]
        return "+".join(sorted(m.id for m in self.mutants)) + "/" + digest


@dataclass
class Recorded:
    """One check's requests (the earlier ones that made its objects first) and the learner's answers."""

    check: CheckResult
    events: list[Event]
    digest: str | None
    # the requests whose answer depends on the random state the learner's jail happened to be
    # in (a model's fresh weights): the solution answers them differently with another seed
    unstable: frozenset[int] = frozenset()
    seconds: float = 0.0  # what replaying them on the solution takes

    @property
    def costly(self) -> bool:
        """Replaying it takes long (a training run): tried last, and bugs are paired elsewhere."""
        return self.trains or self.seconds > COSTLY_SECONDS

    @property
    def learner(self) -> list[Outcome | None]:
        """The learner's answers, None where there is nothing to compare them on."""
        return [None if i in self.unstable else e.outcome for i, e in enumerate(self.events)]

    @property
    def trains(self) -> bool:
        return any(e.op == "train_lm" for e in self.events)

    def before_training(self) -> Recorded:
        """Its requests up to its first training run: replaying one costs a second or more, so
        bugs are paired, and passing checks kept passing, on the requests before it."""
        return self.until(
            next((i for i, e in enumerate(self.events) if e.op == "train_lm"), len(self.events))
        )

    def until(self, cut: int) -> Recorded:
        """Its first `cut` requests."""
        if cut >= len(self.events):
            return self
        events = self.events[:cut]
        return Recorded(
            self.check, events, requests_digest(events), frozenset(i for i in self.unstable if i < cut)
        )

    def comparable(self) -> list[int]:
        """The requests whose answer can be compared (a load answers nothing; a value too large
        to keep was not kept; one that depends on the random state is not the code's alone)."""
        return [i for i, o in enumerate(self.learner) if o is not None and o.kind != "opaque"]


@dataclass
class Explanation:
    """What the search found: the sets of known bugs that reproduce every request, whether it
    tried all it meant to (else nothing is a fact), and the input that told sets apart."""

    sets: list[Suspect] = field(default_factory=list)
    complete: bool = True
    told_apart_by: str | None = None
    told_apart: frozenset[str] = frozenset()  # the bugs that input decided between

    def facts(self) -> list:
        if not self.sets or not self.complete:
            return []
        common = frozenset.intersection(*(s.ids for s in self.sets))
        return [m for m in self.sets[0].mutants if m.id in common]

    def candidates(self) -> list:
        facts = {m.id for m in self.facts()}
        found: dict[str, object] = {}
        for s in self.sets:
            found.update({m.id: m for m in s.mutants if m.id not in facts})
        return list(found.values())


class Namer:
    """Names the known bugs of one submission, within FINGERPRINT_SECONDS in all.

    rerun: runs requests on the learner's code in the jail (SubmissionSession.rerun), for the
    inputs that tell candidate sets apart; without it, sets alike on the recorded requests stay
    candidates."""

    def __init__(
        self, exercise, trace: Trace, seconds: float = FINGERPRINT_SECONDS, rerun: Rerun | None = None
    ):
        from grader.catalog.exercises import exercise_dir

        self.exercise = exercise
        self.trace = trace
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.rerun = rerun
        folder = exercise_dir(exercise.id) / "solution"
        self.solution = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))}
        self._mutants: list | None = None

    # -- the whole submission -----------------------------------------------------------------
    def explain(self, results: Sequence[CheckResult]) -> list[Diagnosis]:
        """The diagnoses of a graded submission's failed checks (none when all passed, or when
        the learner's answers are the solution's on every recorded request)."""
        self.deadline = time.monotonic() + self.seconds
        failed = [r for r in self._recorded(results, passed=False) if r.comparable()]
        if not failed:
            return []
        solution: dict[str, list[Outcome]] = {}
        for r in failed:
            outcomes = self._stabilized(r)
            if outcomes is None:
                return []  # the solution itself cannot be replayed on these requests: nothing to say
            solution[r.check.id] = outcomes
        differs = {
            (r.check.id, i)
            for r in failed
            for i in r.comparable()
            if not same(r.events[i].outcome, solution[r.check.id][i])  # type: ignore[arg-type]
        }
        if not differs:
            return []  # the learner's answers are the solution's: the checks failed on something else
        # a set of bugs that does not reproduce the learner is told soonest by the cheapest check
        # that failed on its own requests; training runs last
        ran = list(failed)  # in the order the checks ran: the report's order
        failed.sort(key=lambda r: (r.costly, not any(c == r.check.id for c, _ in differs), r.seconds))
        passed = [p for r in self._recorded(results, passed=True) if (p := r.before_training()).events]
        if any(self._stabilized(r) is None for r in passed):
            return []
        found = self._search(failed, passed, differs, solution)
        if found.sets and found.complete and len(found.sets) > 1:
            found = self._tell_apart(found, failed)
        if not found.sets:
            return self._localized(ran, differs, searched=found.complete)
        return self._diagnoses(found, ran, solution)

    def _stabilized(self, recorded: Recorded) -> list[Outcome] | None:
        """The solution's answers to a check's requests, the requests whose answer changes with
        the random generators' seed marked unstable (in place); None if it cannot be replayed."""
        reference = Suspect((), self.solution)
        started = time.monotonic()
        outcomes = self._replay(recorded, reference)
        recorded.seconds = time.monotonic() - started
        if recorded.digest is not None:  # remembered: what it took the first time
            key = (f"{self.exercise.id}/{reference.key}", recorded.digest)
            recorded.seconds = replay_seconds(key) or recorded.seconds
        other = self._replay(recorded, reference, seed=1)
        if (
            outcomes is None
            or other is None
            or len(outcomes) < len(recorded.events)
            or len(other) < len(outcomes)
        ):
            return None
        recorded.unstable = frozenset(
            i for i, (a, b) in enumerate(zip(outcomes, other, strict=True)) if not same(a, b)
        )
        return outcomes

    def _recorded(self, results: Sequence[CheckResult], passed: bool) -> list[Recorded]:
        out = []
        for r in results:
            if r.passed is not passed or r.id not in self.trace.checks:
                continue
            events = [e for e in self.trace.events(r.id) if e.outcome is not None or e.op == "load"]
            if events:
                out.append(Recorded(r, events, requests_digest(events)))
        return out

    # -- the search -------------------------------------------------------------------------------
    def _search(self, failed, passed, differs, solution) -> Explanation:
        mutants = self.mutants()
        starter = [m for m in mutants if m.id in getattr(self.exercise, "starter_mutants", [])]
        # (in the order of `mutants`, as the pairs and triples below are: a set is one tuple)
        starter_sets = [c for n in range(2, len(starter) + 1) for c in itertools.combinations(starter, n)]
        eligible: list | None = None
        reaches: dict[str, set] = {}
        # the requests bugs are paired on: each failed check's first few answered wrong, before
        # any training run (after its first failure a check shrinks the input: more of the same)
        paired: set[tuple[str, int]] = set()
        for cheap in (True, False):  # the costly checks only when no other answered wrong
            for r in (r for r in failed if not (cheap and r.costly)):
                before = len(r.before_training().events)
                wrong = sorted(i for check, i in differs if check == r.check.id and i < before)
                paired |= {(r.check.id, i) for i in wrong[:PAIRING_REQUESTS]}
            if paired:
                break
        largest = max(LARGEST_SET, len(starter))
        for size in range(1, largest + 1):
            if size == 1:
                groups: list[tuple] = [(m,) for m in mutants]
            else:
                if eligible is None:
                    eligible = self._eligible(mutants, failed, paired, solution, reaches)
                    if eligible is None:
                        return Explanation(complete=False)
                groups = [
                    g
                    for g in itertools.combinations(eligible, size)
                    if size <= LARGEST_SET and _may_explain(g, reaches, paired)
                ]
                groups += [s for s in starter_sets if len(s) == size and s not in groups]
            found = Explanation()
            for group in groups:
                if self._late():
                    found.complete = False  # a set not tried could explain it as well
                    return found
                suspect = self._suspect(group)
                if (
                    suspect is not None
                    and self._reproduces(suspect, failed)
                    and self._reproduces(suspect, passed)
                ):
                    found.sets.append(suspect)
            if found.sets:
                return found
        return Explanation()

    def _eligible(self, mutants, failed, paired, solution, reaches) -> list | None:
        """The bugs worth pairing: each alone changes a request the learner's code got wrong
        (`paired`: those before any training run; when there are none, every bug is worth it).
        reaches[id] <- the requests it changes. None when out of time."""
        last: dict[str, int] = {}
        for check, i in paired:
            last[check] = max(i, last.get(check, -1))
        eligible = []
        for m in mutants:
            if self._late():
                return None
            suspect = self._suspect((m,))
            if suspect is None:
                continue
            changed: set[tuple[str, int]] = set()
            # what a bug changes matters where the learner's answers differ: up to the last such
            for r in (r.until(last[r.check.id] + 1) for r in failed if r.check.id in last):
                outcomes = self._replay(r, suspect)
                if outcomes is None:
                    break
                own = solution[r.check.id]
                changed |= {
                    (r.check.id, i)
                    for i in r.comparable()
                    if i >= len(outcomes) or not same(own[i], outcomes[i])
                }
            else:
                reaches[m.id] = changed
                if changed & paired or not paired:
                    eligible.append(m)
        return eligible

    def _reproduces(self, suspect: Suspect, recorded: Sequence[Recorded]) -> bool:
        for r in recorded:
            outcomes = self._replay(r, suspect, until_differs=True)
            if outcomes is None or len(outcomes) < len(r.events):
                return False
            if not all(a is None or same(a, o) for a, o in zip(r.learner, outcomes, strict=True)):
                return False
        return True

    def mutants(self) -> list:
        if self._mutants is None:
            from grader.catalog.mutants import load_mutants

            self._mutants = [m for m in load_mutants() if self.exercise.id in m.exercises]
        return self._mutants

    def _suspect(self, group: tuple) -> Suspect | None:
        from grader.catalog.mutants import mutated_sources

        files: dict[str, str] | None = dict(self.solution)
        for m in group:
            files = mutated_sources(m, self.exercise.id, files) if files is not None else None
        return None if files is None else Suspect(tuple(group), files)

    def _late(self) -> bool:
        return time.monotonic() > self.deadline

    def _replay(
        self, recorded: Recorded, suspect: Suspect, until_differs: bool = False, seed: int = 0
    ) -> list[Outcome] | None:
        """The suspect's answers to a check's requests; with until_differs, they stop at the first
        that is not the learner's. None if it does not import, or time ran out."""
        modules = counterpart(suspect.files, f"{self.exercise.id}/{suspect.key}")
        if modules is None:
            return None
        learner = recorded.learner

        def differs(i: int, outcome: Outcome) -> bool:
            return until_differs and learner[i] is not None and not same(learner[i], outcome)  # type: ignore[arg-type]

        seconds = max(self.deadline - time.monotonic(), 0.001)
        try:
            if recorded.digest is None:
                return replay(recorded.events, modules, until=differs, seconds=seconds, seed=seed)
            # the same requests replayed on the same code answer alike for every learner
            key = (f"{self.exercise.id}/{suspect.key}", recorded.digest)
            return remembered_replay(key, recorded.events, modules, until=differs, seconds=seconds, seed=seed)
        except TimeoutError:
            return None

    # -- telling sets apart -------------------------------------------------------------------------
    def _tell_apart(self, found: Explanation, failed: Sequence[Recorded]) -> Explanation:
        """Inputs on which the sets answer differently, run on the learner's code: only the sets
        it matches stay. No such input (or no jail to run it): all stay, as candidates of one another."""
        if self.rerun is None:
            return found
        sets = list(found.sets)
        told_by = None
        signatures = Signatures(
            counterpart(self.solution, f"{self.exercise.id}/{Suspect((), self.solution).key}")
        )
        for events, changed in variants(failed, signatures, self.trace):
            if len(sets) < 2 or self._late():
                break
            reference = self._answers(events, Suspect((), self.solution))
            if reference is None or any(reference[i].kind == "raised" for i in changed):
                continue  # not an input the exercise allows
            answers: dict[str, list[Outcome]] = {}
            for s in sets:
                answer = self._answers(events, s)
                if answer is None:
                    break
                answers[s.key] = answer
            if len(answers) < len(sets):
                continue
            if all(_alike(answers[sets[0].key], answers[s.key], changed) for s in sets[1:]):
                continue  # this input does not tell them apart
            learner = self.rerun(events, self._left())
            if learner is None:
                break  # the jail could not answer: nothing more is learned from it
            kept = [s for s in sets if _alike(learner, answers[s.key], changed)]
            if not kept:
                # the learner matches none of them on this input: none is their code's behaviour
                return Explanation(found.sets, complete=False)
            if len(kept) < len(sets):
                told_by = describe_call(events[changed[0]], signatures, self.trace)
                sets = kept
        before = Explanation(found.sets)
        decided = frozenset(m.id for m in before.candidates()) if told_by else frozenset()
        return Explanation(sets, complete=True, told_apart_by=told_by, told_apart=decided)

    def _answers(self, events: list[Event], suspect: Suspect) -> list[Outcome] | None:
        """A set of bugs' answers to requests no check made (an input that may tell sets apart)."""
        modules = counterpart(suspect.files, f"{self.exercise.id}/{suspect.key}")
        try:
            return replay(events, modules, seconds=self._left()) if modules is not None else None
        except TimeoutError:
            return None

    def _left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    # -- what the report says ---------------------------------------------------------------------
    def _diagnoses(self, found: Explanation, failed: Sequence[Recorded], solution) -> list[Diagnosis]:
        def first_check(m) -> str:
            """The first failed check (in the order they ran) whose requests this bug, alone,
            answers otherwise."""
            single = self._suspect((m,))
            for r in failed:
                outcomes = self._replay(r, single) if single is not None else None
                own = solution[r.check.id]
                if outcomes is not None and any(
                    i >= len(outcomes) or not same(own[i], outcomes[i]) for i in r.comparable()
                ):
                    return r.check.id
            return failed[0].check.id

        facts = [
            _diagnosis(
                m, first_check(m), "reproduced", found.told_apart_by if m.id in found.told_apart else None
            )
            for m in found.facts()[:FINGERPRINT_NAMES]
        ]
        candidates = [
            _diagnosis(m, first_check(m), "candidate", None)
            for m in found.candidates()[:FINGERPRINT_CANDIDATES]
        ]
        return facts + candidates

    def _localized(self, failed: Sequence[Recorded], differs, searched: bool) -> list[Diagnosis]:
        """Where the difference starts: the innermost functions whose calls differ (those that call
        no other differing function of the solution), each with its smallest failing call.
        searched: every set of known bugs meant was tried (else the search ran out of time, and
        the message says so rather than that no known bug explains it)."""
        key = f"{self.exercise.id}/{Suspect((), self.solution).key}"
        signatures = Signatures(counterpart(self.solution, key))
        calls: dict[str, tuple[int, Event, CheckResult]] = {}  # function -> its smallest failing call
        for r in failed:
            for i, event in enumerate(r.events):
                if (r.check.id, i) not in differs or event.op != "call":
                    continue
                name = function_name(event, self.trace)
                if name is None:
                    continue
                size = _elements(event.fields)
                if name not in calls or size < calls[name][0]:
                    calls[name] = (size, event, r.check)
        graph = call_graph(self.solution)
        names = set(calls)
        innermost = [
            n for n in names if not (reachable(graph, _unit(n)) & {_unit(o) for o in names if o != n})
        ]
        innermost.sort(key=lambda n: calls[n][0])
        out = []
        for name in innermost[:FINGERPRINT_NAMES]:
            _, event, check = calls[name]
            call = describe_call(event, signatures, self.trace)
            out.append(
                Diagnosis(
                    rule=check.rule,
                    day=check.day,
                    check=check.id,
                    level="localized",
                    searched=searched,
                    function=name,
                    call=call,
                    message=msg(
                        "the difference from the reference starts in {function}: its smallest failing "
                        "call is {call}, and no known bug explains it",
                        function=name,
                        call=call,
                    )
                    if searched
                    else msg(
                        "the difference from the reference starts in {function}: its smallest failing "
                        "call is {call} (the grader ran out of time before it had compared every known bug)",
                        function=name,
                        call=call,
                    ),
                )
            )
        return out


def _may_explain(group: tuple, reaches: dict[str, set], differs: set) -> bool:
    """Whether bugs applied together may answer every request as the learner's code did: each
    request it answered wrong is changed by one of them alone. (A request one of them changes
    that the learner answered right may still come out right together: `triu(diagonal=0)` blocks
    a lone key, which a -1e9 fill then attends to all the same.)"""
    return differs <= set().union(*(reaches[m.id] for m in group))


def _alike(a: Sequence[Outcome], b: Sequence[Outcome], indices: Sequence[int]) -> bool:
    return all(i < len(a) and i < len(b) and same(a[i], b[i]) for i in indices)


def _diagnosis(mutant, check: str, level: str, call: str | None) -> Diagnosis:
    return Diagnosis(
        rule=mutant.rule,
        day=mutant.day,
        mutant=mutant.id,
        check=check,
        level=level,
        call=call,
        message=mutant.message.en,
        message_i18n={"en": mutant.message.en, "zh-TW": mutant.message.zh_TW},
    )


# -- the solution's functions: signatures, call graph, calls written as code ----------------------
class Signatures:
    """The solution's functions, to name a request's parameters and its default flags."""

    def __init__(self, modules):
        self.modules = modules or {}

    def of(self, event: Event, trace: Trace) -> inspect.Signature | None:
        obj = self._callable(event, trace)
        try:
            return inspect.signature(obj) if obj is not None else None
        except (TypeError, ValueError):
            return None

    def _callable(self, event: Event, trace: Trace):
        target = event.target
        if "module" in target:
            obj = self.modules.get(str(target["module"]))
            for name in target.get("path", []):
                obj = getattr(obj, name, None)
            return obj
        cls = self._made_class(event, trace)
        if cls is None:
            return None
        path = target.get("path", [])
        return getattr(cls, path[-1], None) if path else getattr(cls, "forward", None)

    def _made_class(self, event: Event, trace: Trace):
        maker = trace.made_by.get((event.generation, int(event.target["handle"])))
        if maker is None or "module" not in maker.target:
            return None
        obj = self.modules.get(str(maker.target["module"]))
        for name in maker.target.get("path", []):
            obj = getattr(obj, name, None)
        return obj if isinstance(obj, type) else None


def function_name(event: Event, trace: Trace) -> str | None:
    """A call's function as the learner wrote it: `split_heads`, `MultiHeadAttention.forward`."""
    target = event.target
    if "module" in target:
        path = [str(p) for p in target.get("path", [])]
        return ".".join(path) or None
    maker = trace.made_by.get((event.generation, int(target["handle"])))
    if maker is None or "module" not in maker.target or not maker.target.get("path"):
        return None
    cls = str(maker.target["path"][-1])
    path = [str(p) for p in target.get("path", [])]
    return f"{cls}.{path[-1] if path else 'forward'}"


def _unit(name: str) -> str:
    """The solution's top-level definition a function name belongs to."""
    return name.split(".")[0]


def call_graph(files: dict[str, str]) -> dict[str, set[str]]:
    """Top-level function or class -> the top-level definitions its body names."""
    defs: dict[str, ast.AST] = {}
    for text in files.values():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for top in tree.body:
            if isinstance(top, (ast.FunctionDef, ast.ClassDef)):
                defs[top.name] = top
    graph = {}
    for name, definition in defs.items():
        used = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name)}
        used |= {n.attr for n in ast.walk(definition) if isinstance(n, ast.Attribute)}
        graph[name] = {u for u in used if u in defs and u != name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += graph.get(n, ())
    return seen


def describe_call(event: Event, signatures: Signatures, trace: Trace) -> str:
    """A request written as code: `scaled_dot_product_attention(q=float32[2, 4, 8], causal=True)`."""
    name = function_name(event, trace) or "call"
    args = list(event.fields.get("args", []))
    kwargs = dict(event.fields.get("kwargs", {}))
    signature = signatures.of(event, trace)
    names = [p for p in signature.parameters if p != "self"] if signature is not None else []
    parts = [f"{names[i]}={_shown(a)}" if i < len(names) else _shown(a) for i, a in enumerate(args)]
    parts += [f"{k}={_shown(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _shown(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return f"{type(value).__name__} of {len(value)}"
    if isinstance(value, (bool, int, float, str)) or value is None:
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    return type(value).__name__


def _elements(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (list, tuple)):
        return sum(_elements(v) for v in value) + len(value)
    if isinstance(value, dict):
        return sum(_elements(v) for v in value.values())
    return 1


# -- inputs that tell sets of bugs apart ------------------------------------------------------------
def variants(
    failed: Sequence[Recorded], signatures: Signatures, trace: Trace
) -> Iterator[tuple[list[Event], list[int]]]:
    """Copies of a failed check's requests with its calls changed in one way: (the requests, the
    indices of the calls changed). Each a valid input as far as the solution goes (the caller
    drops those the solution refuses)."""
    for r in failed:
        calls = [
            i for i, e in enumerate(r.events) if e.op == "call" and e.outcome is not None and not _makes(e)
        ]
        if not calls:
            continue
        changes = (
            _explicit_defaults(signatures, trace, flip=False),
            _explicit_defaults(signatures, trace, flip=True),
            _one_more_row,
            _longer(1, 2),
            _longer(2, 1),
            _in_dtype(torch.bfloat16),
            _in_dtype(torch.float16),
            _in_dtype(torch.float64),
            _fresh_values,
        )
        for change in changes:
            events = list(r.events)
            changed = []
            for i in calls:
                fields = change(r.events[i])
                if fields is not None:
                    events[i] = Event(
                        r.events[i].seq,
                        r.events[i].op,
                        r.events[i].target,
                        r.events[i].generation,
                        fields,
                        r.events[i].outcome,
                    )
                    changed.append(i)
            if changed:
                yield events, changed


def _makes(event: Event) -> bool:
    """Whether a call made a learner object (a constructor): changing it changes every later use."""
    return event.outcome is not None and bool(handles_in(event.outcome.value))


def _explicit_defaults(signatures: Signatures, trace: Trace, flip: bool):
    """The call with each boolean parameter it left to its default passed explicitly: as the
    default (a default the learner changed shows), or flipped (a flag the learner ignores shows)."""

    def change(event: Event) -> dict | None:
        signature = signatures.of(event, trace)
        if signature is None:
            return None
        names = [p for p in signature.parameters if p != "self"]
        given = set(names[: len(event.fields.get("args", []))]) | set(event.fields.get("kwargs", {}))
        flags = {
            name: (not p.default) if flip else p.default
            for name, p in signature.parameters.items()
            if isinstance(p.default, bool) and name not in given
        }
        if not flags:
            return None
        return {**event.fields, "kwargs": {**event.fields.get("kwargs", {}), **flags}}

    return change


def _one_more_row(event: Event) -> dict | None:
    """The call with one more batch row: every tensor argument of the call's batch size grows by
    its first row (a bug that reads the batch size where it means a head's size shows)."""
    args, kwargs = event.fields.get("args", []), event.fields.get("kwargs", {})
    tensors = [v for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor) and v.dim() >= 3]
    if not tensors:
        return None
    batch = tensors[0].shape[0]

    def grown(v):
        if isinstance(v, torch.Tensor) and v.dim() >= 3 and v.shape[0] == batch:
            return torch.cat([v, v[:1]])
        return v

    return {
        **event.fields,
        "args": [grown(a) for a in args],
        "kwargs": {k: grown(v) for k, v in kwargs.items()},
    }


def _longer(queries: int, keys: int):
    """An attention call (queries, keys, values: its first three arguments, floating tensors,
    keys and values of one length) with more queries and more keys (their first row repeated):
    a mask aligned wrongly when the lengths differ shows."""

    def change(event: Event) -> dict | None:
        args, kwargs = list(event.fields.get("args", [])), event.fields.get("kwargs", {})
        if len(args) < 3 or any(isinstance(v, torch.Tensor) for v in [*args[3:], *kwargs.values()]):
            return None
        q, k, v = args[:3]
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() >= 2 for t in (q, k, v)):
            return None
        if k.shape[-2] != v.shape[-2]:
            return None

        def grown(t: torch.Tensor, n: int) -> torch.Tensor:
            return torch.cat([t, t[..., :1, :].expand(*t.shape[:-2], n, t.shape[-1])], dim=-2)

        return {**event.fields, "args": [grown(q, queries), grown(k, keys), grown(v, keys), *args[3:]]}

    return change


def _in_dtype(dtype: torch.dtype):
    """The call with its floating tensor arguments in another precision (a masking constant
    that overflows one shows)."""

    def change(event: Event) -> dict | None:
        args, kwargs = event.fields.get("args", []), event.fields.get("kwargs", {})
        floats = [
            v for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor) and v.is_floating_point()
        ]
        if not floats or all(v.dtype == dtype for v in floats):
            return None

        def cast(v):
            return v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v

        return {
            **event.fields,
            "args": [cast(a) for a in args],
            "kwargs": {k: cast(v) for k, v in kwargs.items()},
        }

    return change


def _fresh_values(event: Event) -> dict | None:
    """The call with fresh random values in each floating tensor argument (same shape and dtype)."""
    generator = torch.Generator().manual_seed(7)
    args, kwargs = event.fields.get("args", []), event.fields.get("kwargs", {})
    if not any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in [*args, *kwargs.values()]):
        return None

    def fresh(v):
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel():
            return torch.randn(v.shape, generator=generator, dtype=torch.float64).to(v.dtype)
        return v

    return {
        **event.fields,
        "args": [fresh(a) for a in args],
        "kwargs": {k: fresh(v) for k, v in kwargs.items()},
    }
