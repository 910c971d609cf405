"""Exploring a contract: hidden tests draw their inputs from the whole space SPEC defines and
report the smallest one that fails, and a tolerance that follows the conditioning of the problem.

`explore(cases, prop)` runs `prop` (which calls the learner and fails via expect_close/fail) on
cases drawn by a hypothesis strategy. It is seeded from nothing but the code (derandomize), keeps
no example database and prints nothing, so a submission always gets the same grade, and a failure
is shrunk to the smallest failing case, whose CheckFailure is raised with the input shown. What
ends a check in the jail (a timeout, a crash, NotImplementedError) or keeps it from the learner's
code (testkit.Unusable: a broken module, a missing name) is raised at once: it is never
repeated to shrink it. A grading process keeps the cases of a run in which none failed (they are
every correct learner's), and runs them again without hypothesis's engine: see `explore`.

The strategies below are the pieces every exercise's contract shares (batch dims 0-3, T = 1, odd
and even sizes, float32/float16/bfloat16, large magnitudes). A case holds real tensors, built from
a drawn seed, so what a learner is shown is exactly what was sent.
"""

from __future__ import annotations

import copy
import functools
import math
import random
import types
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException
from hypothesis.internal.entropy import deterministic_PRNG
from hypothesis.strategies._internal.lazy import LazyStrategy

from grader.grading.failures import CheckFailure, Unusable, tolerance
from grader.grading.runner import explain
from grader.jail.client import JailError, LearnerError
from grader.limits import EXPLORED_RUNS
from grader.locale import msg

# Cases drawn per explored check: enough to reach each corner of the strategies below, few enough
# that grading a correct solution stays well under a second per check.
EXPLORE_EXAMPLES = 6
# Calls made while shrinking one failure: a learner function that fails everywhere shrinks in a
# few dozen; the cap bounds a failure that shrinks slowly (each call is a round trip to the jail).
SHRINK_CALLS = 150
SEED = 45  # every exploration draws from the same seed: a submission always gets the same grade
DESCRIBED_VALUES = 8  # a tensor of at most this many entries is shown with its values
DESCRIPTION_CHARS = 600


class _Abort(BaseException):
    """Carries what must not be shrunk (a jail error, NotImplementedError, a bug in the hidden
    test itself) out of hypothesis at once: hypothesis catches Exception, not BaseException."""

    def __init__(self, error: BaseException | None):
        super().__init__()
        self.error = error


class _Failed(Exception):
    """Every failing case raises this one exception from one place, so hypothesis sees one bug
    and shrinks it; the learner's CheckFailure is kept aside, with its case."""


@functools.cache
def _hypothesis_home() -> None:
    """Where hypothesis keeps its files (the example database is off, but it caches each local
    module's constants under `constants/`): the grader's cache folder (GRADER_CACHE_DIR, else
    ~/.cache/gpt-bughunt-grader: grader.jail.doctor), never `.hypothesis/` in the folder the grader
    was run from. Writing there failing is no error to hypothesis: it only computes again."""
    from hypothesis.configuration import set_hypothesis_home_dir

    from grader.jail.doctor import _cache_dir

    set_hypothesis_home_dir(_cache_dir() / "hypothesis")


def _settings(examples: int) -> settings:
    _hypothesis_home()
    return settings(
        max_examples=examples,
        derandomize=False,  # seeded below: derandomize would hash the source of `run` on every call
        database=None,
        deadline=None,
        verbosity=Verbosity.quiet,
        phases=(Phase.generate, Phase.shrink),  # no explain phase: its calls are not the smallest
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        report_multiple_bugs=False,
    )


def explore(
    cases: st.SearchStrategy,
    prop: Callable[[object], None],
    *,
    examples: int = EXPLORE_EXAMPLES,
    what: str = "",
    corners: Sequence = (),
) -> None:
    """Run `prop(case)` on `examples` cases drawn from `cases`, and raise the CheckFailure of the
    smallest failing case found; when none fails, on each of `corners` (explicit cases the
    strategy may miss), raising the first failure as written.

    `what` names what a case is the input of (e.g. "stable_softmax"), for the message.

    The cases of a run where none failed are kept (`_drawn`, keyed by the strategy): the next
    submission gets the same cases, run without hypothesis's engine, and hypothesis runs only
    when one of them fails, its first calls answered with what was seen, so that the learner's
    code is called on exactly the cases, in the order, a run of hypothesis calls it."""
    try:
        key, namespaces = _reuse_key(cases, examples)
    except Exception:  # noqa: BLE001 - e.g. a strategy's invalid argument: hypothesis says so, as before
        key, namespaces = None, []
    drawn = _drawn.get(key) if key is not None else None
    answered: list[BaseException | None] = []  # what the first calls of hypothesis get
    if key is not None and drawn is not None:
        _drawn.move_to_end(key)
        for case in drawn.cases:
            failure = _run_drawn(copy.deepcopy(case), prop)
            answered.append(failure)
            if failure is not None:
                break  # hypothesis shrinks it
        else:
            for case in corners:
                corner(case, prop, what=what)
            return
    seen = [] if drawn is None else drawn.cases[: len(answered)]
    recorded = _Recording() if key is not None and drawn is None else None
    _explore(cases, prop, examples, what, corners, seen, answered, recorded)
    if key is not None and recorded is not None and recorded.cases is not None:
        _keep(key, _Drawn(recorded.cases, namespaces))


def _explore(cases, prop, examples, what, corners, seen: list, answered: list, recorded) -> None:
    """explore() with hypothesis: its first len(answered) calls, on the `seen` cases, are
    answered from `answered` (None: passed; else that failure); `recorded` (a _Recording, or
    None) gets the cases of a run in which none failed."""

    failures: list[tuple[object, BaseException]] = []  # the last is hypothesis's smallest so far
    calls_since_failure = 0

    def run(case) -> None:
        nonlocal calls_since_failure
        if failures:
            calls_since_failure += 1
            if calls_since_failure > SHRINK_CALLS:
                raise _Abort(None)  # enough shrinking: the last failure seen is the smallest yet
        known = bool(answered) and _same_case(case, seen[0])
        answer = None
        if known:
            seen.pop(0)
            answer = answered.pop(0)
            if answer is None:
                return  # it passed when it was run
        else:
            answered.clear()  # hypothesis drew another case (never seen): from here each one runs
            if recorded is not None:
                recorded.drawn(case)
        try:
            if answer is not None:
                # the failure this case had, raised again where it was, as hypothesis tells one bug
                # from another by where it arose: it shrinks as if the case had just failed
                raise answer
            prop(case)
        except Unusable as exc:  # no input is to blame
            raise _Abort(exc) from None
        except AssertionError as exc:  # a CheckFailure, or a plain assert in a check
            failures.append((case, exc))
            raise _Failed from None
        except LearnerError as exc:
            if exc.is_a("NotImplementedError"):
                raise _Abort(exc) from None
            failures.append((case, exc))
            raise _Failed from None
        except (JailError, Exception) as exc:  # noqa: BLE001  (a jail error, or the check's own bug)
            raise _Abort(exc) from None
        finally:
            if recorded is not None:
                recorded.ran()

    try:
        seed(SEED)(given(cases)(_settings(examples)(run)))()
    except _Abort as abort:
        if recorded is not None:
            recorded.cases = None
        if abort.error is not None:
            raise abort.error from None
    except (_Failed, HypothesisException):  # e.g. Flaky: a learner whose failure did not repeat
        if recorded is not None:
            recorded.cases = None
        if not failures:
            raise
    if failures:
        smallest_case, its_error = failures[-1]
        raise _failure(smallest_case, its_error, what, smallest=True) from None
    for case in corners:
        corner(case, prop, what=what)


# -- running the cases of an earlier exploration ---------------------------------------------


@dataclass
class _Drawn:
    """The cases hypothesis drew for one strategy, in order, none of which failed; `namespaces`:
    those the key names by id, held so that no other namespace can take the id."""

    cases: list
    namespaces: list


_drawn: OrderedDict[tuple, _Drawn] = OrderedDict()


def _keep(key: tuple, drawn: _Drawn) -> None:
    _drawn[key] = drawn
    _drawn.move_to_end(key)
    while len(_drawn) > EXPLORED_RUNS:
        _drawn.popitem(last=False)


class _Recording:
    """The cases of one run of hypothesis as drawn (copied before the check can change them);
    `cases` is None when they cannot be run again without it: a case failed or ended the check,
    or drawing it moved torch's global generator, or left Python's or numpy's other than
    hypothesis seeds them for the check."""

    def __init__(self):
        self.cases: list | None = []
        self._torch_state = torch.get_rng_state()

    def drawn(self, case) -> None:
        if self.cases is None:
            return
        if not (_as_seeded() and torch.equal(torch.get_rng_state(), self._torch_state)):
            self.cases = None
            return
        try:
            self.cases.append(copy.deepcopy(case))
        except Exception:  # noqa: BLE001 - a case that cannot be copied is drawn by hypothesis each time
            self.cases = None

    def ran(self) -> None:
        self._torch_state = torch.get_rng_state()


def _run_drawn(case, prop: Callable[[object], None]) -> BaseException | None:
    """prop(case) as hypothesis's run would call it (Python's and numpy's generators seeded as
    it seeds them): None if it passed, the failure to shrink, or what ends the check, raised."""

    try:
        with deterministic_PRNG():
            prop(case)
    except Unusable as exc:
        raise exc from None
    except AssertionError as exc:
        return exc
    except LearnerError as exc:
        if exc.is_a("NotImplementedError"):
            raise exc from None
        return exc
    except (JailError, Exception) as exc:  # as explore's run: a jail error or the check's bug ends it
        raise exc from None
    return None


# values whose repr is the value itself: a strategy made of these and of functions is named exactly
# by its repr and the functions' code and namespaces (so are these types: `.map(tuple)`)
_EXACT = (type(None), bool, int, float, complex, str, bytes, torch.dtype)
_EXACT_TYPES = frozenset({tuple, list, dict, set, frozenset, int, float, complex, bool, str, bytes})


def _reuse_key(strategy: st.SearchStrategy, examples: int) -> tuple[tuple | None, list]:
    """What decides the cases a seeded run of hypothesis draws from `strategy`: its repr, the
    code, defaults and module namespace of every function of it outside hypothesis, and the
    settings (how many cases); and those namespaces. None when something of it may vary unseen by that (a
    closure, a tensor, a class or object of another kind): such a strategy is explored by
    hypothesis every time. The hidden test module is imported once per process, so a function's
    namespace names its version."""
    functions: dict[types.FunctionType, None] = {}
    todo: list = [strategy]
    seen: set[int] = set()
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, _EXACT):
            continue
        seen.add(id(item))
        if isinstance(item, type):
            if item not in _EXACT_TYPES:
                return None, []
        elif isinstance(item, st.SearchStrategy):
            if isinstance(item, LazyStrategy):
                todo.append(item.wrapped_strategy)
            todo += vars(item).values()
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo += item
        elif isinstance(item, dict):
            todo += [*item.keys(), *item.values()]
        elif isinstance(item, functools.partial):
            todo += [item.func, item.args, item.keywords]
        elif isinstance(item, types.FunctionType) and item.__module__.startswith("hypothesis"):
            todo += [cell.cell_contents for cell in item.__closure__ or ()]  # what it wraps
        elif isinstance(item, types.FunctionType):
            if item.__closure__:
                return None, []
            functions[item] = None
            todo += [item.__defaults__, item.__kwdefaults__]
        elif not isinstance(item, types.BuiltinFunctionType):
            return None, []
    code = sorted(
        (
            (
                f.__module__,
                f.__qualname__,
                id(f.__globals__),
                f.__code__,
                repr(f.__defaults__),
                repr(f.__kwdefaults__),
            )
            for f in functions
        ),
        key=lambda c: (c[0], c[1], c[2], repr(c[4:])),
    )
    # the settings as hypothesis would run with them: those explore leaves open come from the
    # loaded profile (its backend, for one)
    return (repr(strategy), tuple(code), repr(_settings(examples)), SEED), [f.__globals__ for f in functions]


def _same_case(a, b) -> bool:
    """Whether two cases are the same data: tensors and arrays of one dtype and shape, bit for bit
    (a NaN is the same NaN), the rest equal."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(torch.equal(_bits(a), _bits(b)))
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_case(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_case(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a).__module__ == "numpy" and hasattr(a, "tobytes"):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - what cannot say it is equal is not the same case
        return False


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


@functools.cache
def _seeded_states() -> tuple:
    """Python's and numpy's global generators as hypothesis seeds them for a check (seed 0)."""
    import numpy as np

    return random.Random(0).getstate(), np.random.RandomState(0).get_state(legacy=False)


def _as_seeded() -> bool:
    """Whether Python's and numpy's global generators are as hypothesis seeds them for a check."""
    import numpy as np

    python, numpy = _seeded_states()
    state = np.random.get_state(legacy=False)
    return (
        random.getstate() == python
        and state["state"]["pos"] == numpy["state"]["pos"]
        and bool(np.array_equal(state["state"]["key"], numpy["state"]["key"]))
        and (state["bit_generator"], state["has_gauss"], state["gauss"])
        == (numpy["bit_generator"], numpy["has_gauss"], numpy["gauss"])
    )


def corner(case, prop: Callable[[object], None], *, what: str = "") -> None:
    """Run `prop` on one explicit case (e.g. the contract's own example, [500, 502]); its failure
    is raised with the input shown, as written."""

    try:
        prop(case)
    except (AssertionError, LearnerError) as exc:
        if isinstance(exc, Unusable) or _not_implemented(exc):
            raise
        raise _failure(case, exc, what, smallest=False) from None


def _not_implemented(exc: BaseException) -> bool:
    return isinstance(exc, LearnerError) and exc.is_a("NotImplementedError")


def _failure(case, exc: BaseException, what: str, *, smallest: bool):
    """The case's CheckFailure, its message followed by the input it failed on."""

    message, symptoms, evidence = explain(exc)
    shown = describe(case)
    if smallest and what:
        text = msg(
            "{failure} Smallest failing input of {what} found: {input}",
            failure=message,
            what=what,
            input=shown,
        )
    elif smallest:
        text = msg("{failure} Smallest failing input found: {input}", failure=message, input=shown)
    elif what:
        text = msg("{failure} Failing input of {what}: {input}", failure=message, what=what, input=shown)
    else:
        text = msg("{failure} Failing input: {input}", failure=message, input=shown)
    diagnosis = exc.diagnosis if isinstance(exc, CheckFailure) else ()
    return CheckFailure(text, symptoms=symptoms, diagnosis=diagnosis, evidence={**evidence, "input": shown})


# -- showing a case ------------------------------------------------------------------------------


def describe(value) -> str:
    """A case as a learner reads it: shapes, dtypes, flags, and the values of small tensors."""
    text = _describe(value)
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 3] + "..."


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return _describe_tensor(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_describe(v)}" for k, v in value.items())
    if isinstance(value, tuple) and value and not all(isinstance(v, int) for v in value):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)[:200]


def _describe_tensor(t: torch.Tensor) -> str:
    dtype = str(t.dtype).replace("torch.", "")
    if t.numel() <= DESCRIBED_VALUES:
        values = t.tolist()
        return f"tensor({_round(values)}, dtype={dtype})"
    shape = tuple(t.shape)
    if t.dtype == torch.bool:
        return f"{dtype} tensor of shape {shape} ({int(t.sum())} True)"
    finite = t[torch.isfinite(t)]
    span = f", |values| up to {float(finite.abs().max()):.3g}" if finite.numel() else ""
    if t.is_floating_point() and bool(torch.isneginf(t).any()):
        span += ", with -inf entries"
    return f"{dtype} tensor of shape {shape}{span}"


def _round(values):
    if isinstance(values, list):
        return "[" + ", ".join(_round(v) for v in values) + "]"
    if isinstance(values, bool):
        return str(values)
    if isinstance(values, float) and math.isfinite(values):
        return f"{values:.4g}"
    if isinstance(values, float):
        return "float('-inf')" if values < 0 else ("float('inf')" if values > 0 else "nan")
    return repr(values)


# -- strategies for the pieces every contract shares ------------------------------------------

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # shrinks towards float32


def batch_dims(max_dims: int = 3, max_size: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    """Leading batch dimensions: none to `max_dims` of them, each 1..max_size (shrinks to ())."""
    return st.lists(st.integers(1, max_size), max_size=max_dims).map(tuple)


def sizes(low: int = 1, high: int = 9) -> st.SearchStrategy[int]:
    """A sequence length or width: 1 (T = 1), odd and even (shrinks to `low`)."""
    return st.integers(low, high)


def float_dtypes(dtypes: Sequence[torch.dtype] = FLOAT_DTYPES) -> st.SearchStrategy[torch.dtype]:
    return st.sampled_from(list(dtypes))


MAGNITUDES = (1.0, 3.0, 30.0, 500.0, 1e4)  # 1e4: far past where exp overflows in any dtype


def magnitudes(values: Sequence[float] = MAGNITUDES) -> st.SearchStrategy[float]:
    """A scale for the values of a tensor, small to large (shrinks to 1)."""
    return st.sampled_from(list(values))


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**16)


def random_tensor(shape, *, dtype=torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    """Standard normal entries times `scale`, drawn in float64 from `seed`, then cast: the same
    tensor for the same arguments on every machine."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def tensors(shapes: st.SearchStrategy, dtypes=None, scales=None) -> st.SearchStrategy[torch.Tensor]:
    """Tensors of a drawn shape, dtype and magnitude (float32 and scale 1 unless given)."""
    return st.builds(
        lambda shape, dtype, seed, scale: random_tensor(shape, dtype=dtype, seed=seed, scale=scale),
        shapes,
        dtypes if dtypes is not None else st.just(torch.float32),
        seeds(),
        scales if scales is not None else st.just(1.0),
    )


# -- the conditioned tolerance -------------------------------------------------------------------

# How many times what the float64 reference moves, when its inputs are perturbed at the dtype's
# rounding, a correct result may differ by on top of the eps*sqrt(n) rule: a formulation that
# rounds differently (exp(z - logsumexp(z))) moves about as much; a bug moves orders of magnitude
# more.
CONDITION_FACTOR = 4.0
CONDITION_TRIALS = 3


def _moved(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest entrywise difference; equal entries (inf included) and NaN pairs count 0."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    diff = torch.where(same, torch.zeros_like(a), (a - b).abs())
    return float(torch.nan_to_num(diff, nan=math.inf).max()) if diff.numel() else 0.0


def conditioned_tolerance(
    reference_fn: Callable[..., torch.Tensor],
    inputs: Sequence,
    dtype: torch.dtype,
    reduction: int = 1,
    seed: int = 0,
    exponential: bool = False,
) -> float:
    """The tolerance for a `dtype` result of reference_fn(*inputs): today's eps*sqrt(n) rule plus
    CONDITION_FACTOR times the most the float64 reference moves when each floating input is
    perturbed by a relative eps of `dtype` (seeded, CONDITION_TRIALS times). Other inputs (masks,
    flags) are passed unchanged.

    exponential: the result is the exp of a difference of inputs (a softmax): a correct formula
    may round that difference at the inputs' magnitude (exp(z - logsumexp(z)) does), an error of
    eps * max|z| relative to the result even where no perturbation of z moves it (a saturated
    softmax); that much is allowed too."""

    eps = torch.finfo(dtype).eps
    exact = [x.to(torch.float64) if _is_float(x) else x for x in inputs]
    base = reference_fn(*exact)
    g = torch.Generator().manual_seed(seed)
    moved = 0.0
    for _ in range(CONDITION_TRIALS):
        perturbed = [x * (1 + eps * _uniform(x.shape, g)) if _is_float(x) else x for x in exact]
        moved = max(moved, _moved(reference_fn(*perturbed), base))
    if exponential:
        moved = max(moved, eps * _largest(exact) * _largest([base]))
    return tolerance(dtype, reduction) + CONDITION_FACTOR * moved


def _largest(tensors: Sequence) -> float:
    """The largest finite magnitude among the floating tensors (0 if none)."""
    finite = [x[torch.isfinite(x)].abs() for x in tensors if _is_float(x)]
    return max((float(f.max()) for f in finite if f.numel()), default=0.0)


def _uniform(shape, generator: torch.Generator) -> torch.Tensor:
    """Uniform in [-1, 1], float64."""
    return 2 * torch.rand(shape, generator=generator, dtype=torch.float64) - 1


def _is_float(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()
