"""How long one call into the jail may take: a multiple of what the reference takes for it.

    budget = max(CALL_FLOOR_SECONDS, CALL_BUDGET_FACTOR x the reference's seconds for the same call)

The reference counterpart of a call is found in the trusted process, never from the jail's data:
`data.make_xy(chunk)` is `reference_model.data.make_xy(chunk)` (a module the reference package
lacks, like the bug hunt's `bughunt`, is the exercise's own solution file: trusted course code,
imported here once, never the learner's); a learner object has a twin built
by replaying, on the reference side, the calls that made it (`attention.MultiHeadAttention(8, 2)`,
then `gpt.GPT(gpt.GPTConfig(...))`), and a call on the object is the same call on its twin; a
non-learner module the hidden tests reach through the jail (`torch.Generator()`) is this
process's own. The training probe is budgeted from one forward pass of the twin, scaled to its steps. With no
counterpart (a name the reference lacks, a twin that cannot be built) the budget is the
exercise's call_seconds. The reference is timed once per call signature (the target, and the
arguments' shapes, dtypes and small values) and process, not for each call nor each learner
(the last BUDGET_SIGNATURES signatures are kept); the global random generators are left as they
were, so hidden tests draw the same inputs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import math
import random
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import torch

from grader.jail.wire import Handle
from grader.limits import BUDGET_SIGNATURES, CALL_BUDGET_FACTOR, CALL_FLOOR_SECONDS, CALL_TIMING_SECONDS

REFERENCE_PACKAGE = "reference_model"
# modules other than the learner's that hidden tests reach through the jail: their counterpart
# is this process's own module (only one already imported; nothing is imported for a call)
SHARED_MODULES = frozenset({"torch", "numpy", "math", "random"})
STEP_PER_FORWARD = 4.0  # a training step's time, in forward passes (backward ~2, the update)
_NO_TWIN = object()


class CallBudgets:
    def __init__(self, modules, call_seconds: float, solution_dir: Path | None = None):
        """solution_dir: the exercise's solution folder, the counterpart of a learner module
        that `reference_model` lacks (None: such a module has no counterpart)."""
        self.modules = frozenset(modules)
        self.call_seconds = float(call_seconds)
        self.solution_dir = solution_dir
        self._seconds: dict[tuple, float] = {}  # call signature -> budget
        self._recipes: dict[tuple[int, int], tuple[dict, list, dict]] = {}  # (jail, handle) -> made by
        self._twins: dict[tuple[int, int], object] = {}
        self._last: tuple[tuple, object] | None = None  # the last call timed, and what it returned

    # -- what the session asks --------------------------------------------------------------
    def for_call(self, generation: int, target: dict, args, kwargs) -> float:
        key = self._call_key(generation, target, args, kwargs)
        if key not in self._seconds:
            self._last = None
            seconds = _timed_before(
                (self.modules, self.solution_dir, key),
                lambda: self._measure(lambda: self._reference_call(generation, target, args, kwargs, key)),
            )
            self._seconds[key] = self.call_seconds if seconds is None else self._bounded(seconds)
        return self._seconds[key]

    def for_training(
        self, generation: int, target: dict, steps: int, batch_size: int, block_size: int
    ) -> float:
        key = ("train", self._signature(generation, target), steps, batch_size, block_size)
        if key not in self._seconds:

            def measure() -> float | None:
                model = self._resolve(generation, target)
                if model is _NO_TWIN or not isinstance(model, torch.nn.Module):
                    return None
                per_step = _seconds_per_step(model, batch_size, block_size)
                return None if per_step is None else per_step * max(1, steps)

            seconds = _timed_before((self.modules, self.solution_dir, key), measure)
            self._seconds[key] = self.call_seconds if seconds is None else self._bounded(seconds)
        return self._seconds[key]

    def made(self, generation: int, handle: Handle, target: dict, args, kwargs) -> None:
        """A call returned a learner object: remember how, to build its twin when one is needed
        (the reference's own result, when that call was just timed)."""
        self._recipes[(generation, handle.id)] = (target, list(args), dict(kwargs))
        if self._last is not None and self._last[0] == self._call_key(generation, target, args, kwargs):
            self._twins[(generation, handle.id)] = self._last[1]
        self._last = None

    # -- internals --------------------------------------------------------------------------
    def _measure(self, run) -> float | None:
        """The reference's seconds for the call; None (its budget is call_seconds) when there is
        no counterpart, or when the reference's work runs past CALL_TIMING_SECONDS (timing it to
        the end would cost the grader that work again, e.g. the bug hunt solution's whole train())."""
        with same_random_state():
            started = time.perf_counter()
            try:
                with stopped_after(CALL_TIMING_SECONDS):
                    found = run()
            except TimingStopped:
                return None
            except Exception:  # noqa: BLE001 - the reference raising (on bad input) is its answer too
                found = True
            seconds = time.perf_counter() - started
        return None if found is _NO_TWIN else seconds

    def _bounded(self, reference_seconds: float) -> float:
        """The budget for work the reference does in `reference_seconds`: never under the floor,
        never over call_seconds (the flat limit this replaces stays the bound of any call)."""
        budget = max(CALL_FLOOR_SECONDS, CALL_BUDGET_FACTOR * reference_seconds)
        return min(budget, max(self.call_seconds, CALL_FLOOR_SECONDS))

    def _call_key(self, generation: int, target: dict, args, kwargs) -> tuple:
        made_by = functools.partial(self._made_by, generation)
        return (
            "call",
            self._signature(generation, target),
            _signature(args, made_by),
            _signature(kwargs, made_by),
        )

    def _reference_call(self, generation: int, target: dict, args, kwargs, key: tuple):
        self._last = None
        fn = self._resolve(generation, target)
        args = [self._twin_of(generation, a) for a in args]
        kwargs = {k: self._twin_of(generation, v) for k, v in kwargs.items()}
        if fn is _NO_TWIN or not callable(fn) or any(a is _NO_TWIN for a in [*args, *kwargs.values()]):
            return _NO_TWIN
        self._last = (key, fn(*args, **kwargs))
        return True

    def _resolve(self, generation: int, target: dict):
        obj: object
        if "module" in target:
            module = str(target["module"])
            if module in self.modules:
                found = _reference_module(module, self.solution_dir)
                if found is None:
                    return _NO_TWIN
                obj = found
            elif module in SHARED_MODULES and module in sys.modules:
                obj = sys.modules[module]
            else:
                return _NO_TWIN
        elif "handle" in target:
            obj = self._twin(generation, int(target["handle"]))
        else:
            return _NO_TWIN
        for name in target.get("path", []):
            obj = getattr(obj, str(name), _NO_TWIN)
            if obj is _NO_TWIN:
                return _NO_TWIN
        return obj

    def _twin(self, generation: int, handle: int):
        key = (generation, handle)
        if key not in self._twins:
            self._twins[key] = _NO_TWIN  # a recipe that refers to itself ends here
            recipe = self._recipes.get(key)
            if recipe is not None:
                target, args, kwargs = recipe
                fn = self._resolve(generation, target)
                args = [self._twin_of(generation, a) for a in args]
                kwargs = {k: self._twin_of(generation, v) for k, v in kwargs.items()}
                if (
                    fn is not _NO_TWIN
                    and callable(fn)
                    and all(a is not _NO_TWIN for a in [*args, *kwargs.values()])
                ):
                    with same_random_state(), contextlib.suppress(Exception):
                        self._twins[key] = fn(*args, **kwargs)
        return self._twins[key]

    def _twin_of(self, generation: int, value):
        """An argument as the reference takes it: a handle's twin; tensors copied (the hidden test
        keeps the originals, and a reference could write into its input)."""
        if isinstance(value, Handle):
            return self._twin(generation, value.id)
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, (list, tuple)):
            items = [self._twin_of(generation, v) for v in value]
            return _NO_TWIN if any(v is _NO_TWIN for v in items) else type(value)(items)
        if isinstance(value, dict):
            entries = {k: self._twin_of(generation, v) for k, v in value.items()}
            return _NO_TWIN if any(v is _NO_TWIN for v in entries.values()) else entries
        return value

    def _signature(self, generation: int, target: dict) -> tuple:
        path = tuple(str(p) for p in target.get("path", []))
        if "handle" in target:
            return ("handle", self._made_by(generation, int(target["handle"])), path)
        return ("module", str(target.get("module")), path)

    def _made_by(self, generation: int, handle: int, depth: int = 0) -> tuple:
        """A handle's signature: the call that made it (objects alike are budgeted alike)."""
        recipe = self._recipes.get((generation, handle))
        if recipe is None or depth > 8:
            return ("unknown", handle)
        target, args, kwargs = recipe
        made_by = functools.partial(self._made_by, generation, depth=depth + 1)
        return (self._signature(generation, target), _signature(args, made_by), _signature(kwargs, made_by))


# The reference's seconds per call signature, for every session of this process: one learner's
# calls are another's (the hidden tests choose them), so a warm grader times each once. Timing
# again would find about the same seconds, noise apart; a budget is 20 times them, or the floor.
_timings: OrderedDict[tuple, float | None] = OrderedDict()


def _timed_before(key: tuple, measure: Callable[[], float | None]) -> float | None:
    """measure() for `key` (reference, call signature), from an earlier session when it was
    timed there; the BUDGET_SIGNATURES last used are kept."""
    if key in _timings:
        _timings.move_to_end(key)
        return _timings[key]
    seconds = _timings[key] = measure()
    while len(_timings) > BUDGET_SIGNATURES:
        _timings.popitem(last=False)
    return seconds


@functools.lru_cache(maxsize=32)
def _reference_module(module: str, solution_dir: Path | None):
    """The trusted counterpart of learner module `module`: reference_model's, else the exercise
    solution's file of that name (imported under a private name, its `__main__` block not run)."""
    try:
        return importlib.import_module(f"{REFERENCE_PACKAGE}.{module}")
    except ImportError:
        pass
    path = None if solution_dir is None else solution_dir / f"{module}.py"
    if solution_dir is None or path is None or not path.is_file():
        return None
    private = f"_grader_solution_{solution_dir.parent.name}_{module}"
    spec = importlib.util.spec_from_file_location(private, path)
    if spec is None or spec.loader is None:
        return None
    found = importlib.util.module_from_spec(spec)
    try:
        with same_random_state():
            spec.loader.exec_module(found)
    except Exception:  # noqa: BLE001 - a solution that does not import alone: no counterpart
        return None
    return found


def _signature(value, made_by, depth: int = 0):
    """What a call's time depends on: tensors by shape and dtype, a learner object by the call
    that made it (`made_by(handle id)`), other values as they are (small ones), containers item
    by item (the first few)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype))
    if isinstance(value, Handle):
        return ("handle", made_by(value.id))
    if depth > 4:
        return ("deep",)
    if isinstance(value, (list, tuple)):
        items = tuple(_signature(v, made_by, depth + 1) for v in list(value)[:16])
        return (type(value).__name__, len(value), items)
    if isinstance(value, dict):
        items = tuple((str(k), _signature(v, made_by, depth + 1)) for k, v in list(value.items())[:16])
        return ("dict", items)
    if isinstance(value, float) and not math.isfinite(value):
        return ("float", str(value))
    if isinstance(value, (bool, int, float, type(None))):
        return value
    if isinstance(value, (str, bytes)):
        return (type(value).__name__, len(value), value[:64])
    return ("value", type(value).__name__)


def _seconds_per_step(model: torch.nn.Module, batch_size: int, block_size: int) -> float | None:
    """About the reference twin's seconds per step of the worker's training loop (op_train_lm):
    a forward pass on random tokens, times STEP_PER_FORWARD (a step is a forward, a backward of
    about twice its cost, and the optimizer's update). One forward, not whole steps: timing
    training costs the grader as much again as the training. None if the twin does not run."""
    config = getattr(model, "config", None)
    vocab = getattr(model, "vocab_size", None) or getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1:
        return None
    try:
        with same_random_state(), torch.no_grad():
            x = torch.randint(vocab, (batch_size, block_size), generator=torch.Generator().manual_seed(0))
            started = time.perf_counter()
            model(x)
            return STEP_PER_FORWARD * (time.perf_counter() - started)
    except Exception:  # noqa: BLE001 - a twin that does not fit the loop: no counterpart
        return None


class TimingStopped(BaseException):
    """Raised into a reference call that ran past CALL_TIMING_SECONDS (a BaseException, so the
    reference's own `except Exception` cannot swallow it)."""


@contextlib.contextmanager
def stopped_after(seconds: float):
    """Stop the block with TimingStopped after `seconds` of wall time (a SIGALRM timer; only in
    the main thread, where signals are delivered: elsewhere the block runs to its end)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        if _importing(frame):  # stopped mid-import, a module stays half-made in sys.modules
            signal.setitimer(signal.ITIMER_REAL, IMPORT_DEFERRAL_SECONDS)
            return
        raise TimingStopped

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


IMPORT_DEFERRAL_SECONDS = 0.01  # a stop that falls inside an import is retried this much later


def _importing(frame) -> bool:
    """Whether the interrupted code is importing a module (an optimizer's lazy torch._dynamo)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def same_random_state():
    """The trusted process's random generators as they were: hidden tests draw their inputs from
    them, and timing a reference must not change which inputs a check gets."""
    import numpy as np

    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)
