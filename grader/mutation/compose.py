"""Measuring the bug namer: known bugs composed on an exercise's solution, graded, and what the
grade states as fact compared with what was injected (issue 29; docs/diagnosis.md).

The core is pure: which k-subsets of an exercise's known bugs apply together (`compositions`),
a deterministic sample of them (`sample`), and the counting over graded outcomes (`tally`,
`exclusive`, `floor_problems`). The shell (`compose`) writes each composition to a temporary
folder, grades it through the learner's path (grader.grading.grade.grade) in a spawn pool, and
reports. `grader mutants compose` renders the report; `grader exercise check` runs it on a
small sample (grader.mutation.authoring).

Counting, per composition: *named* are the diagnoses at level "reproduced" that carry a mutant
id (stated as fact); *candidates* those at level "candidate"; *localized* those at level
"localized" (a function, no bug).

- precision = |named and injected| / |named|, summed over every composition (micro);
- recall = |named and injected| / |injected|, over the compositions whose grade failed (a
  composition whose bugs cancel out passes: it is counted apart, as `passed`);
- a *wrong* composition names a bug that was not injected;
- a *contradiction* is a report naming two bugs that cannot both be in one program (`exclusive`:
  their edits cannot be applied together, or they rewrite the same line of the solution).
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, computed_field

# The floors of issue 29's "Done when", in one place: k -> what the command's exit code holds
# it to. None: not a floor at that k. The naming seconds are a floor only when measured.


class Floor(BaseModel):
    precision: float | None = None  # at least
    recall: float | None = None  # at least
    contradictions: int | None = None  # at most
    naming_median_s: float | None = None  # at most: the median time naming adds to a failing grade


FLOORS: dict[int, Floor] = {
    1: Floor(precision=1.00, recall=0.95, naming_median_s=1.0),
    2: Floor(precision=0.98, recall=0.80, contradictions=0, naming_median_s=1.0),
    3: Floor(precision=0.95, naming_median_s=1.0),
}
DEFAULT_SEED = 0


# -- the compositions (pure) --------------------------------------------------------------------
def exercise_bugs(mutants: Iterable, exercise: str) -> list:
    """The known bugs with edits for `exercise`, in id order."""
    return sorted((m for m in mutants if exercise in m.exercises), key=lambda m: m.id)


def applied(bugs: Sequence, exercise: str, files: Mapping[str, str]) -> dict[str, str] | None:
    """`files` with every bug's edits made, in the order given; None when one edit's text is not
    there exactly once after the others (they overlap)."""
    from grader.catalog.mutants import mutated_sources

    sources = dict(files)
    for bug in bugs:
        edited = mutated_sources(bug, exercise, sources)
        if edited is None:
            return None
        sources = edited
    return sources


class Enumeration(BaseModel):
    exercise: str
    k: int
    bugs: int  # the exercise's known bugs
    subsets: int  # k-subsets of them
    overlapping: int  # skipped: their edits do not apply together
    compositions: list[tuple[str, ...]]  # the others, in id order


def compositions(mutants: Iterable, exercise: str, files: Mapping[str, str], k: int) -> Enumeration:
    """Every k-subset of the exercise's known bugs whose edits apply together on `files` (the
    solution), each applied in id order; the overlapping ones counted, not kept."""
    bugs = exercise_bugs(mutants, exercise)
    kept, overlapping, subsets = [], 0, 0
    for combo in itertools.combinations(bugs, k):
        subsets += 1
        sources = applied(combo, exercise, files)
        if sources is None:
            overlapping += 1
        else:
            kept.append(tuple(m.id for m in combo))
    return Enumeration(
        exercise=exercise, k=k, bugs=len(bugs), subsets=subsets, overlapping=overlapping, compositions=kept
    )


def sample(items: Sequence, n: int | None, seed: int = DEFAULT_SEED) -> list:
    """`n` of `items` drawn with `seed` (the same every run), kept in their order; all when n is
    None or at least len(items)."""
    if n is None or n >= len(items):
        return list(items)
    chosen = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in chosen]


def edited_lines(bug, exercise: str, files: Mapping[str, str]) -> set[tuple[str, int]]:
    """(file, line number) of every solution line the bug's edits rewrite; an edit that reaches
    past the bug's own earlier edits is placed in the text as they left it."""
    lines: set[tuple[str, int]] = set()
    texts = dict(files)
    for edit in (e for e in bug.edit if e.exercise == exercise):
        text = texts.get(edit.file, "")
        at = text.find(edit.find)
        if at < 0:
            continue
        first = text.count("\n", 0, at) + 1
        span = edit.find[:-1] if edit.find.endswith("\n") else edit.find
        lines |= {(edit.file, first + i) for i in range(span.count("\n") + 1)}
        texts[edit.file] = text.replace(edit.find, edit.replace, 1)
    return lines


def exclusive(a, b, exercise: str, files: Mapping[str, str]) -> bool:
    """Whether bugs `a` and `b` cannot both be in one program: their edits do not apply together
    on the solution in either order, or both rewrite one of its lines (a line holds one text:
    two bugs written on it are two accounts of the same line)."""
    if applied((a, b), exercise, files) is None and applied((b, a), exercise, files) is None:
        return True
    return bool(edited_lines(a, exercise, files) & edited_lines(b, exercise, files))


def exclusive_pairs(mutants: Iterable, exercise: str, files: Mapping[str, str]) -> set[frozenset[str]]:
    """Every pair of the exercise's known bugs that `exclusive` holds for."""
    bugs = exercise_bugs(mutants, exercise)
    return {
        frozenset((a.id, b.id))
        for a, b in itertools.combinations(bugs, 2)
        if exclusive(a, b, exercise, files)
    }


# -- one graded composition, and the counting (pure) --------------------------------------------
class Outcome(BaseModel):
    """What one composition's grade said."""

    injected: list[str]
    named: list[str] = []  # level "reproduced", with a mutant id: stated as fact
    candidates: list[str] = []  # level "candidate"
    localized: list[str] = []  # level "localized": the function (or check) where it starts
    passed: bool = False
    error: str | None = None  # the grade's error kind, or why it could not be graded
    seconds: float = 0.0  # the grade's wall time, naming included
    naming_seconds: float | None = None  # what naming added (None: not measured)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def wrong(self) -> list[str]:
        return [n for n in self.named if n not in self.injected]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def missed(self) -> list[str]:
        return [] if self.passed else [i for i in self.injected if i not in self.named]


def outcome_of(injected: Sequence[str], grade, timing: bool = True) -> Outcome:
    """An Outcome from the grade of a composition; its naming time (the grade's own naming_s)
    only when timing: a naming time is a floor only where it was measured on purpose."""

    def ids(level: str) -> list[str]:
        return list(dict.fromkeys(d.mutant for d in grade.diagnosis if d.level == level and d.mutant))

    localized = [d.function or d.check or d.rule for d in grade.diagnosis if d.level == "localized"]
    return Outcome(
        injected=list(injected),
        named=ids("reproduced"),
        candidates=ids("candidate"),
        localized=list(dict.fromkeys(localized)),
        passed=grade.passed,
        error=grade.error.kind if grade.error else None,
        seconds=grade.duration_s,
        naming_seconds=grade.naming_s if timing else None,
    )


class Contradiction(BaseModel):
    composition: int  # index into the outcomes
    bugs: tuple[str, str]


class Totals(BaseModel):
    compositions: int = 0
    passed: int = 0  # the bugs cancelled or hid each other entirely: left out of recall
    failed: int = 0
    named: int = 0  # named bugs, over every composition
    named_right: int = 0  # ... of them injected
    injected_failed: int = 0  # injected bugs, over the failed compositions
    found: int = 0  # ... of them named
    precision: float | None = None  # None: nothing was named
    recall: float | None = None  # None: no composition failed
    candidates: int = 0  # candidate bugs, over every composition
    candidates_injected: int = 0  # ... of them injected
    with_candidates: int = 0  # compositions with any candidate
    candidates_hit: int = 0  # ... of them with an injected bug among the candidates
    localized: int = 0  # compositions with a "localized only" diagnosis
    wrong: list[int] = []  # compositions naming a bug that was not injected
    contradictions: list[Contradiction] = []
    naming_median_s: float | None = None
    naming_max_s: float | None = None
    seconds_median: float | None = None


def tally(outcomes: Sequence[Outcome], exclusive_pairs: set[frozenset[str]]) -> Totals:
    """The counts of the module docstring over graded outcomes; `exclusive_pairs`: the pairs of
    bugs that cannot both be in one program (grader.mutation.compose.exclusive_pairs)."""
    t = Totals(compositions=len(outcomes))
    for i, o in enumerate(outcomes):
        injected = set(o.injected)
        named = set(o.named)
        t.named += len(named)
        t.named_right += len(named & injected)
        if o.passed:
            t.passed += 1
        else:
            t.failed += 1
            t.injected_failed += len(injected)
            t.found += len(named & injected)
        candidates = set(o.candidates)
        t.candidates += len(candidates)
        t.candidates_injected += len(candidates & injected)
        if candidates:
            t.with_candidates += 1
            t.candidates_hit += bool(candidates & injected)
        t.localized += bool(o.localized)
        if named - injected:
            t.wrong.append(i)
        for a, b in itertools.combinations(sorted(named), 2):
            if frozenset((a, b)) in exclusive_pairs:
                t.contradictions.append(Contradiction(composition=i, bugs=(a, b)))
    t.precision = round(t.named_right / t.named, 4) if t.named else None
    t.recall = round(t.found / t.injected_failed, 4) if t.injected_failed else None
    naming = [o.naming_seconds for o in outcomes if not o.passed and o.naming_seconds is not None]
    if naming:
        t.naming_median_s = round(statistics.median(naming), 3)
        t.naming_max_s = round(max(naming), 3)
    if outcomes:
        t.seconds_median = round(statistics.median(o.seconds for o in outcomes), 3)
    return t


def floor_problems(totals: Totals, floor: Floor) -> list[str]:
    """What falls below `floor`, one line each; none when it holds. An undefined precision
    (nothing named) or recall (nothing failed) holds."""
    problems = []
    if floor.precision is not None and totals.precision is not None and totals.precision < floor.precision:
        problems.append(f"precision {totals.precision:.3f} < {floor.precision:.2f}")
    if floor.recall is not None and totals.recall is not None and totals.recall < floor.recall:
        problems.append(f"recall {totals.recall:.3f} < {floor.recall:.2f}")
    if floor.contradictions is not None and len(totals.contradictions) > floor.contradictions:
        problems.append(f"{len(totals.contradictions)} reports state two contradictory causes as facts")
    if (
        floor.naming_median_s is not None
        and totals.naming_median_s is not None
        and totals.naming_median_s > floor.naming_median_s
    ):
        problems.append(f"naming adds {totals.naming_median_s:.3f} s (median) > {floor.naming_median_s:g} s")
    return problems


# -- grading (the shell) ------------------------------------------------------------------------
class Job(BaseModel):
    exercise: str
    injected: tuple[str, ...]
    files: dict[str, str]  # the solution's files with the bugs' edits made
    timing: bool = True


def solution_files(exercise: str) -> dict[str, str]:
    """name -> text of the exercise's solution files (the folder's top level)."""
    from grader.catalog.exercises import exercise_dir

    folder = exercise_dir(exercise) / "solution"
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}


def grade_composition(job: Job, grade_with: Callable | None = None) -> Outcome:
    """Grade one composition through the learner's path. grade_with(exercise, path, **options) ->
    Grade: grader.grading.grade.grade unless given (a store of grades)."""
    import shutil
    import tempfile

    from grader.catalog.exercises import exercise_dir
    from grader.errors import UsageError
    from grader.grading.grade import grade

    grade_with = grade_with or grade
    with tempfile.TemporaryDirectory(prefix="grader-compose-") as tmp:
        folder = Path(tmp) / "submission"
        shutil.copytree(
            exercise_dir(job.exercise) / "solution", folder, ignore=shutil.ignore_patterns("__pycache__")
        )
        for name, text in job.files.items():
            (folder / name).write_text(text)
        try:
            named = grade_with(job.exercise, folder)
        except UsageError as exc:  # one composition that cannot be graded never ends the run
            return Outcome(injected=list(job.injected), error=f"could not be graded: {exc}")
    return outcome_of(job.injected, named, job.timing)


def _warm(exercise: str, timing: bool) -> None:
    """A pool worker's first grade when timing (the solution's, discarded): imports, the jail's
    zygote and the hidden tests' collection are paid here, not by the first composition."""
    from grader.catalog.exercises import exercise_dir
    from grader.grading.grade import grade

    if not timing:
        return
    try:
        grade(exercise, exercise_dir(exercise) / "solution", name_bugs=False)
    except Exception:  # noqa: BLE001 - a warm-up only; the compositions report their own failures
        pass


class ComposedRow(BaseModel):
    composition: tuple[str, ...]
    outcome: Outcome


class ComposeReport(BaseModel):
    exercise: str
    k: int
    seed: int
    sample: int | None
    bugs: int
    subsets: int
    overlapping: int
    compatible: int  # compositions that apply together; `rows` holds the sampled ones
    rows: list[ComposedRow]
    exclusive_pairs: list[tuple[str, str]]  # among the bugs named anywhere in this run
    totals: Totals
    floor: Floor
    problems: list[str]
    seconds: float

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return not self.problems


def compose(
    exercise: str,
    k: int,
    n: int | None = None,
    seed: int = DEFAULT_SEED,
    workers: int = 2,
    *,
    timing: bool = True,
    grade_with: Callable | None = None,
    progress: Callable[[ComposedRow], None] | None = None,
) -> ComposeReport:
    """Compose, sample, grade and count. `timing`: report what naming added to each grade (its
    naming_s; each pool worker grades the solution first, so that imports and the jail's start
    are not counted), held to the floor's naming median. grade_with: grade in this process, one
    at a time, with it (no timing then: a store's grades are not timed afresh). UsageError: an
    unknown exercise, a quiz, or k outside FLOORS."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from grader.catalog.exercises import load_exercise
    from grader.catalog.mutants import load_mutants
    from grader.errors import UsageError

    started = time.monotonic()
    ex = load_exercise(exercise)
    if ex.kind != "code":
        raise UsageError(f"{exercise} is a {ex.kind} exercise: it has no known bugs to compose")
    if k not in FLOORS:
        raise UsageError(f"--k {k}: compose 1, 2 or 3 bugs")
    mutants = load_mutants()
    files = solution_files(exercise)
    found = compositions(mutants, exercise, files, k)
    chosen = sample(found.compositions, n, seed)
    by_id = {m.id: m for m in mutants}
    timing = timing and grade_with is None
    jobs = [
        Job(
            exercise=exercise,
            injected=c,
            files=applied([by_id[i] for i in c], exercise, files),
            timing=timing,
        )
        for c in chosen
    ]
    rows: list[ComposedRow] = []

    def keep(job: Job, outcome: Outcome) -> None:
        rows.append(ComposedRow(composition=job.injected, outcome=outcome))
        if progress:
            progress(rows[-1])

    if grade_with is not None:
        for job in jobs:
            keep(job, grade_composition(job, grade_with))
    elif jobs:
        with ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)),
            mp_context=get_context("spawn"),
            initializer=_warm,
            initargs=(exercise, timing),
        ) as pool:
            for job, outcome in zip(jobs, pool.map(grade_composition, jobs), strict=True):
                keep(job, outcome)
    named_anywhere = sorted({n for r in rows for n in r.outcome.named})
    pairs = {
        frozenset((a, b))
        for a, b in itertools.combinations(named_anywhere, 2)
        if a in by_id and b in by_id and exclusive(by_id[a], by_id[b], exercise, files)
    }
    totals = tally([r.outcome for r in rows], pairs)
    floor = FLOORS[k]
    return ComposeReport(
        exercise=exercise,
        k=k,
        seed=seed,
        sample=n,
        bugs=found.bugs,
        subsets=found.subsets,
        overlapping=found.overlapping,
        compatible=len(found.compositions),
        rows=rows,
        exclusive_pairs=sorted(tuple(sorted(p)) for p in pairs),
        totals=totals,
        floor=floor,
        problems=floor_problems(totals, floor) if rows else [],
        seconds=round(time.monotonic() - started, 1),
    )


# -- rendering ----------------------------------------------------------------------------------
def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def text_report(report: ComposeReport) -> str:
    """One line per composition (what was injected, what the grade named, its candidates and
    localizations, whether it passed, its seconds and naming seconds, and a mark: WRONG names a
    bug not injected, missed lists the injected bugs not named), then the totals and the floor."""
    t = report.totals
    header = ["#", "injected", "named", "candidates", "localized", "passed", "s", "naming s", "mark"]
    table = []
    for i, row in enumerate(report.rows):
        o = row.outcome
        mark = []
        if o.wrong:
            mark.append("WRONG " + ",".join(o.wrong))
        if o.missed:
            mark.append("missed " + ",".join(o.missed))
        if o.error:
            mark.append(f"error {o.error}")
        table.append(
            [
                str(i),
                "+".join(o.injected),
                ",".join(o.named) or "-",
                ",".join(o.candidates) or "-",
                ",".join(o.localized) or "-",
                "yes" if o.passed else "no",
                _seconds(o.seconds),
                _seconds(o.naming_seconds),
                "; ".join(mark) or "ok",
            ]
        )
    widths = [max(len(r[c]) for r in [header, *table]) for c in range(len(header) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in [header, *table]
    ]
    lines.append("")
    lines.append(
        f"{report.exercise} k={report.k}: {report.bugs} known bugs, {report.subsets} subsets, "
        f"{report.overlapping} overlapping (skipped), {report.compatible} compatible, "
        f"{len(report.rows)} graded (sample {report.sample if report.sample is not None else 'all'}, "
        f"seed {report.seed}) in {report.seconds:g} s"
    )
    lines.append(
        f"precision {_ratio(t.precision)} ({t.named_right}/{t.named} named were injected)   "
        f"recall {_ratio(t.recall)} ({t.found}/{t.injected_failed} injected named, over {t.failed} "
        f"failed; {t.passed} passed, left out)"
    )
    lines.append(
        f"candidates: {t.candidates} ({t.candidates_injected} injected) in {t.with_candidates} "
        f"compositions, an injected bug among them in {t.candidates_hit}; localized only: {t.localized}"
    )
    lines.append(f"wrong names: {len(t.wrong)}" + (f" (#{', #'.join(map(str, t.wrong))})" if t.wrong else ""))
    contradictions = ", ".join(f"#{c.composition} {c.bugs[0]} vs {c.bugs[1]}" for c in t.contradictions)
    lines.append(
        f"contradictory facts: {len(t.contradictions)}" + (f" ({contradictions})" if contradictions else "")
    )
    lines.append(
        f"naming seconds (failed compositions): median {_seconds(t.naming_median_s)}, max "
        f"{_seconds(t.naming_max_s)}; grade seconds median {_seconds(t.seconds_median)}"
    )
    floor = ", ".join(f"{k} {v:g}" for k, v in report.floor.model_dump().items() if v is not None)
    verdict = "floors hold" if report.passed else "BELOW THE FLOOR: " + "; ".join(report.problems)
    lines.append(f"floor (k={report.k}): {floor} -> {verdict}")
    return "\n".join(lines)


def report_json(report: ComposeReport) -> str:
    return report.model_dump_json(indent=2)
