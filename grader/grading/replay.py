"""The calls a check made, recorded, and replayed on trusted code: the mutant is its own fingerprint.

Every request a hidden test makes of the learner's code passes through the submission session
(grader.grading.session), which records it per check as an `Event`: what was asked (a call, a load of
weights, a training run, ...) and what came back (a value, or the type of the exception raised).
When a check fails, its events are replayed in this process on the exercise's solution and on
each of its mutants (trusted code: the grader's own files, never the learner's), through the very
operations the jail's worker runs (grader/jail/worker.py), and a mutant whose outcomes match the
learner's, where the solution's do not, names the learner's bug (grader.grading.fingerprints).

    modules = counterpart(files, key="day45-attention/no-scale")   # trusted sources, imported here
    outcomes = replay(events, modules)                              # one Outcome per event
    same(learner_outcome, outcome)                                  # NaNs, shapes, values, raises

Replaying is deterministic (one thread, the random generators seeded), so the outcomes of one
counterpart on one sequence of requests are those of every learner whose check made them:
`remembered_replay` keeps them in this process (REPLAY_CACHE_BYTES), keyed by the counterpart
and `requests_digest(events)`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.util
import math
import random
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np
import torch

import grader.jail
from grader.grading.budgets import TimingStopped, same_random_state, stopped_after
from grader.jail import wire
from grader.jail.wire import Handle
from grader.limits import REPLAY_CACHE_BYTES, REPLAY_EVENTS, REPLAY_VALUE_ELEMENTS

# how far apart two floats of a dtype may be and still be the same outcome: relative to the
# value, loose enough for a different summation order (threads), tight enough for any bug
TOLERANCE = {
    torch.float64: 1e-7,
    torch.float32: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 5e-2,
}


@dataclass
class Outcome:
    """What came back from one request: a value (plain data, tensors, Handles of objects that
    stayed in the jail), an exception (its type name), or nothing comparable ("opaque": too
    large to keep, or not answered)."""

    kind: Literal["value", "raised", "opaque"]
    value: Any = None


@dataclass
class Event:
    """One request of a check, as the session sent it. `fields`: the request's own fields (args
    and kwargs of a call, the state of a load, a training run's settings); `outcome` is None
    where there is nothing to compare (a load answers only whether it fit)."""

    seq: int
    op: str  # "call" | "load" | "params" | "state" | "get" | "train_lm"
    target: dict
    generation: int
    fields: dict
    outcome: Outcome | None = None


@dataclass
class Trace:
    """The events of a submission's checks, and which event made each learner object, so that a
    check using an object another check made can still be replayed."""

    checks: dict[str, list[Event]] = field(default_factory=dict)
    current: str | None = None
    stopped: set[str] = field(default_factory=set)  # checks whose recording ended early
    made_by: dict[tuple[int, int], Event] = field(default_factory=dict)
    loads: dict[tuple[int, int], list[Event]] = field(default_factory=dict)
    _seq: int = 0

    def begin(self, check: str) -> None:
        self.current = check
        self.checks[check] = []

    def record(
        self, op: str, target: dict, generation: int, fields: dict, outcome: Outcome | None
    ) -> Event | None:
        """Keep one request of the current check (args copied: a test may change them later)."""
        self._seq += 1
        event = Event(self._seq, op, dict(target), generation, _copied(fields), outcome)
        check = self.current
        if check is not None and check not in self.stopped:
            events = self.checks.setdefault(check, [])
            if len(events) < REPLAY_EVENTS:
                events.append(event)
            else:
                self.stopped.add(check)
        if outcome is not None and outcome.kind == "value":
            for handle in handles_in(outcome.value):
                self.made_by[(generation, handle.id)] = event
        if op == "load" and "handle" in target and not target.get("path"):
            self.loads.setdefault((generation, int(target["handle"])), []).append(event)
        return event

    def stop(self) -> None:
        """The current check's request ended in the jail's trouble (a timeout, a crash): what
        came after is not the learner's code answering, so nothing more is recorded for it."""
        if self.current is not None:
            self.stopped.add(self.current)

    def events(self, check: str) -> list[Event]:
        """A check's events, preceded by those (of earlier checks) that made the learner objects
        it uses and loaded their weights."""
        own = self.checks.get(check, [])
        needed: dict[int, Event] = {}

        def need(key: tuple[int, int], before: int) -> None:
            maker = self.made_by.get(key)
            if maker is None or maker.seq >= before or maker.seq in needed:
                return
            needed[maker.seq] = maker
            for dependency in _uses(maker):
                need(dependency, maker.seq)
            for load in self.loads.get(key, []):
                if load.seq < before:
                    needed[load.seq] = load

        first = own[0].seq if own else 0
        for event in own:
            for key in _uses(event):
                need(key, first)
        return sorted(needed.values(), key=lambda e: e.seq) + own


def outcome_of(value) -> Outcome:
    """The Outcome of a reply the session received (too large a value is not kept)."""
    if _elements(value) > REPLAY_VALUE_ELEMENTS:
        return Outcome("opaque")
    return Outcome("value", _copied(value))


def raised(type_name: str) -> Outcome:
    return Outcome("raised", type_name)


# -- trusted counterparts ----------------------------------------------------------------------
class _SourceLoader(importlib.abc.Loader):
    def __init__(self, source: str, filename: str):
        self.source, self.filename = source, filename

    def exec_module(self, module):
        module.__file__ = self.filename
        exec(compile(self.source, self.filename, "exec"), module.__dict__)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Serves a set of sources under their bare names (`from attention import x` finds its sibling)."""

    def __init__(self, sources: Mapping[str, str], key: str):
        self.sources, self.key = sources, key

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.sources:
            loader = _SourceLoader(self.sources[fullname], f"<{self.key}>/{fullname}.py")
            return importlib.util.spec_from_loader(fullname, loader)
        return None


_counterparts: dict[str, dict[str, ModuleType] | None] = {}


def counterpart(files: Mapping[str, str], key: str) -> dict[str, ModuleType] | None:
    """Trusted code (a solution, or a mutant of it) imported in this process: module name ->
    module, or None if it does not import. Cached by `key`; sys.modules is left as it was."""
    if key not in _counterparts:
        sources = {name.removesuffix(".py"): text for name, text in files.items() if name.endswith(".py")}
        finder = _SourceFinder(sources, key)
        with _bare_names(sources):
            sys.meta_path.insert(0, finder)
            try:
                with same_random_state():
                    _counterparts[key] = {name: importlib.import_module(name) for name in sources}
            except Exception:  # noqa: BLE001 - a mutant that does not import names nothing
                _counterparts[key] = None
            finally:
                sys.meta_path.remove(finder)
    return _counterparts[key]


@contextlib.contextmanager
def _bare_names(modules: Mapping[str, Any]) -> Iterator[None]:
    """While the block runs, `modules`' names are theirs alone in sys.modules; then as before."""
    saved = {name: sys.modules.pop(name) for name in modules if name in sys.modules}
    try:
        yield
    finally:
        for name in modules:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


@contextlib.contextmanager
def _installed(modules: Mapping[str, ModuleType]) -> Iterator[None]:
    """A counterpart's modules under their bare names while it runs (an import inside a function)."""
    with _bare_names(modules):
        sys.modules.update(modules)
        yield


# -- replay -------------------------------------------------------------------------------------
def _jail_worker() -> ModuleType:
    """The jail's worker module, loaded once under a private name: replaying runs its operations,
    so a mutant is asked exactly what the learner's code was asked."""
    name = "_grader_replay_worker"
    if name not in sys.modules:
        saved_path = list(sys.path)
        path = Path(grader.jail.__file__).with_name("worker.py")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)  # it puts its own folder on sys.path for `import wire`
        finally:
            sys.path[:] = saved_path
        sys.modules[name] = module
    return sys.modules[name]


class _Stopped(Exception):
    """Replaying ran out of its time."""


def replay(
    events: Sequence[Event],
    modules: Mapping[str, ModuleType],
    *,
    float64: bool = False,
    gradients: bool = False,
    until: Callable[[int, Outcome], bool] | None = None,
    seconds: float | None = None,
    seed: int = 0,
) -> list[Outcome]:
    """The same requests on `modules`, in order; one Outcome per event (None-outcome events, the
    loads, give Outcome("opaque")). Objects are rebuilt by replaying the calls that made them.

    float64: modules and floating inputs in float64 (an equivalence check, free of rounding);
    gradients: each floating tensor a call returns is also differentiated (a fixed random
    weighting of it) with respect to the call's floating inputs and its module's parameters,
    and the gradients are part of the outcome.
    until(i, outcome) -> True stops the replay after event i (the caller has seen enough);
    seconds: the replay stops (raising TimeoutError) after this much wall time; seed: of torch's,
    numpy's and Python's generators when it starts (an answer that changes with it depends on
    the random state, which the learner's jail had as its own history left it)."""
    worker_module = _jail_worker()
    worker = _ReplayWorker(modules, worker_module, float64=float64)
    outcomes: list[Outcome] = []
    timer = stopped_after(seconds) if seconds else contextlib.nullcontext()
    try:
        with same_random_state(), _installed(modules), _one_thread(), timer:
            # the CPU generator alone, as same_random_state restores it: torch.manual_seed would
            # also queue a seed for each accelerator, formatting the stack each time (4 ms)
            torch.default_generator.manual_seed(seed)
            np.random.seed(seed)
            random.seed(seed)
            deadline = time.monotonic() + seconds if seconds else math.inf
            for i, event in enumerate(events):
                if time.monotonic() > deadline:  # where no timer can run (not the main thread)
                    raise TimingStopped
                outcome = worker.run(event, gradients=gradients)
                outcomes.append(outcome)
                if until is not None and until(i, outcome):
                    break
    except TimingStopped:
        raise TimeoutError("replay ran out of time") from None
    return outcomes


# -- remembered replays --------------------------------------------------------------------------
@dataclass
class _Replayed:
    outcomes: list[Outcome]
    complete: bool  # every event replayed (else `until` stopped it, and more may follow)
    size: int  # bytes, about (tensors' own, and a little for each outcome)
    seconds: float  # what replaying them took


_replayed: OrderedDict[tuple, _Replayed] = OrderedDict()
_replayed_bytes = 0
OUTCOME_BYTES = 256  # what an outcome costs besides its tensors, about


def remembered_replay(
    key: tuple,
    events: Sequence[Event],
    modules: Mapping[str, ModuleType],
    *,
    until: Callable[[int, Outcome], bool] | None = None,
    seconds: float | None = None,
    seed: int = 0,
) -> list[Outcome]:
    """replay(events, modules, until=, seconds=, seed=), from this process's earlier replay of the
    same `key` (the counterpart's own key and requests_digest(events)) and seed. The outcomes kept are walked
    with `until`; when they end before it stops, and that replay had stopped early, the events
    are replayed again (the longer outcomes are kept). The least recently used are dropped past
    REPLAY_CACHE_BYTES."""
    key = (*key, seed)
    kept = _replayed.get(key)
    if kept is not None:
        _replayed.move_to_end(key)
        for i, outcome in enumerate(kept.outcomes):
            if until is not None and until(i, outcome):
                return kept.outcomes[: i + 1]
        if kept.complete:
            return list(kept.outcomes)
    started = time.monotonic()
    outcomes = replay(events, modules, until=until, seconds=seconds, seed=seed)
    if kept is None or len(outcomes) > len(kept.outcomes):
        _remember(key, outcomes, complete=len(outcomes) == len(events), seconds=time.monotonic() - started)
    return outcomes


def replay_seconds(key: tuple, seed: int = 0) -> float | None:
    """What the replay remembered under `key` and `seed` took (None: none is remembered)."""
    kept = _replayed.get((*key, seed))
    return None if kept is None else kept.seconds


def _remember(key: tuple, outcomes: list[Outcome], complete: bool, seconds: float) -> None:
    global _replayed_bytes
    if key in _replayed:
        _replayed_bytes -= _replayed.pop(key).size
    size = sum(OUTCOME_BYTES + sum(t.nbytes for t in _tensors(o.value)) for o in outcomes)
    _replayed[key] = _Replayed(outcomes, complete, size, seconds)
    _replayed_bytes += size
    while _replayed_bytes > REPLAY_CACHE_BYTES and _replayed:
        _replayed_bytes -= _replayed.popitem(last=False)[1].size


def requests_digest(events: Sequence[Event]) -> str | None:
    """A hash of what replaying `events` reads: each request (op, target, which jail, its fields,
    tensors by dtype, shape and bytes) and which learner objects its answer made, objects and
    jails numbered in order of appearance. None if a field holds a value of another kind
    (nothing is remembered for it)."""
    digest = hashlib.blake2b(digest_size=20)
    # learner objects numbered as they appear, and jails as they come: what a learner made in
    # earlier checks (their handles' ids) does not change what replaying these requests does
    numbers: dict[tuple[int, int], int] = {}
    jails: dict[int, int] = {}

    def number(generation: int, handle_id: int) -> int:
        return numbers.setdefault((generation, handle_id), len(numbers))

    def numbered(value, generation: int):
        if isinstance(value, Handle):
            return Handle(number(generation, value.id), "")
        if isinstance(value, (list, tuple)):
            return type(value)(numbered(v, generation) for v in value)
        if isinstance(value, dict):
            return {k: numbered(v, generation) for k, v in value.items()}
        return value

    try:
        for event in events:
            generation = event.generation
            target = dict(event.target)
            if "handle" in target:
                target["handle"] = number(generation, int(target["handle"]))
            answer = event.outcome
            made = (
                None
                if answer is None
                else (answer.kind, [number(generation, h.id) for h in handles_in(answer.value)])
            )
            jail = jails.setdefault(generation, len(jails))
            _feed(digest, (event.op, target, jail, numbered(event.fields, generation), made))
    except (TypeError, RuntimeError):  # a kind of value, or a tensor whose bytes torch will not give
        return None
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, torch.Tensor):
        data = value.detach().contiguous().reshape(-1)
        digest.update(f"T{value.dtype}{tuple(value.shape)}".encode())
        digest.update(data.view(torch.uint8).numpy() if data.numel() else b"")
    elif isinstance(value, np.ndarray):
        digest.update(f"A{value.dtype}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, Handle):
        digest.update(f"H{value.id}".encode())
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}{len(value)}(".encode())
        for item in value:
            _feed(digest, item)
        digest.update(b")")
    elif isinstance(value, dict):
        digest.update(f"dict{len(value)}(".encode())
        for k, item in value.items():
            _feed(digest, k)
            _feed(digest, item)
        digest.update(b")")
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype)):
        text = repr(value)
        digest.update(f"{type(value).__name__}{len(text)}:{text}".encode())
    else:
        raise TypeError(type(value).__name__)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One torch thread, as in the jail: the same summation order, so a long training run replayed
    here ends where the jail's did."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _ReplayWorker:
    def __init__(self, modules: Mapping[str, ModuleType], worker_module: ModuleType, float64: bool):
        outer = self

        class Worker(worker_module.Worker):  # type: ignore[name-defined]
            def resolve(self, target):
                return outer.resolve(target)

        self.modules = modules
        self.wire = worker_module.wire
        self.worker = Worker("/nonexistent")
        self.float64 = float64
        self.objects: dict[tuple[int, int], Any] = {}  # the learner's (generation, handle) -> ours
        self.generation = 0

    def resolve(self, target: dict):
        if "module" in target:
            name = str(target["module"])
            obj = self.modules[name] if name in self.modules else sys.modules[name]
        else:
            obj = self.objects[(self.generation, int(target["handle"]))]
        for name in target.get("path", []):
            obj = getattr(obj, name)
        return obj

    def run(self, event: Event, gradients: bool) -> Outcome:
        self.generation = event.generation
        inputs: list[torch.Tensor] = []
        try:
            request = {"op": event.op, "target": event.target, **self._ours(_copied(event.fields))}
            if gradients and event.op == "call":
                inputs = [t for t in _tensors(request) if t.is_floating_point()]
                for t in inputs:
                    t.requires_grad_(True)
            result = self.worker.ops[event.op](request)
        except Exception as exc:  # noqa: BLE001 - a mutant raising is its answer
            return raised(type(exc).__name__)
        if event.op == "load" or event.outcome is None:
            return Outcome("opaque")
        extra = self._gradients(event, result, inputs) if gradients and event.op == "call" else None
        try:
            body = self.wire.encode({"ok": result}, to_handle=self.worker.to_handle)
            value = wire.decode(body[wire.PREFIX_BYTES :])["ok"]
        except Exception as exc:  # noqa: BLE001 - what cannot cross the wire is the answer too
            return raised(type(exc).__name__)
        # the objects the learner got back are ours from now on, pairwise
        if event.outcome.kind == "value":
            for theirs, ours in zip(handles_in(event.outcome.value), handles_in(value), strict=False):
                obj = self.worker.objects[ours.id]
                if self.float64 and isinstance(obj, torch.nn.Module):
                    obj.double()
                self.objects[(event.generation, theirs.id)] = obj
        return Outcome("value", value if extra is None else (value, extra))

    def _ours(self, value):
        """The learner's handles in a request, as our own objects; floats in float64 if asked."""
        if isinstance(value, Handle):
            return self.objects[(self.generation, value.id)]
        if isinstance(value, torch.Tensor):
            return value.double() if self.float64 and value.is_floating_point() else value
        if isinstance(value, list):
            return [self._ours(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._ours(v) for v in value)
        if isinstance(value, dict):
            return {k: self._ours(v) for k, v in value.items()}
        return value

    def _gradients(self, event: Event, result, inputs: list[torch.Tensor]) -> list | None:
        outputs = [t for t in _tensors(result) if t.is_floating_point() and t.requires_grad]
        if not outputs:
            return None
        owner = self.resolve({**event.target, "path": []}) if "handle" in event.target else None
        parameters = list(owner.parameters()) if isinstance(owner, torch.nn.Module) else []
        wrt = inputs + parameters
        if not wrt:
            return None
        generator = torch.Generator().manual_seed(1)
        total = torch.stack(
            [(o * torch.randn(o.shape, generator=generator, dtype=o.dtype)).sum().double() for o in outputs]
        ).sum()
        grads = torch.autograd.grad(total, wrt, allow_unused=True)
        for p in parameters:
            p.grad = None
        return [g.detach() if g is not None else None for g in grads]


# -- comparing ----------------------------------------------------------------------------------
def same(a: Outcome, b: Outcome, tolerance: float | None = None) -> bool:
    """Whether two outcomes are the same answer: both raised the same exception type, or equal values
    (tensors: shape, dtype, NaN and inf positions, and values within the dtype's TOLERANCE
    relative to their size; handles match handles). An opaque outcome matches anything."""
    if a.kind == "opaque" or b.kind == "opaque":
        return True
    if a.kind != b.kind:
        return False
    if a.kind == "raised":
        return a.value == b.value
    return _same_value(a.value, b.value, tolerance)


def _same_value(a, b, tolerance: float | None) -> bool:
    if isinstance(a, Handle) or isinstance(b, Handle):
        return isinstance(a, Handle) and isinstance(b, Handle)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and _same_tensor(a, b, tolerance)
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, (str, bytes)) or a is None:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return _same_tensor(
            torch.tensor(float(a)), torch.tensor(float(b)), tolerance or TOLERANCE[torch.float64]
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y, tolerance) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k], tolerance) for k in a)
    return a == b


def _same_tensor(a: torch.Tensor, b: torch.Tensor, tolerance: float | None) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype.is_complex:
        return False
    if not a.is_floating_point() or torch.equal(a, b):  # equal: the common case, decided at once
        return bool(torch.equal(a, b))
    tol = tolerance if tolerance is not None else TOLERANCE.get(a.dtype, 1e-4)
    a, b = a.double(), b.double()
    if not torch.equal(torch.isnan(a), torch.isnan(b)):
        return False
    finite = torch.isfinite(a) & torch.isfinite(b)
    if not torch.equal(a[~finite].nan_to_num(), b[~finite].nan_to_num()):  # the same infinities
        return False
    a, b = a[finite], b[finite]
    if a.numel() == 0:
        return True
    scale = max(1.0, float(b.abs().max()))
    return bool(((a - b).abs() <= tol * scale).all())


def distance(a: Outcome, b: Outcome) -> float:
    """How far apart two matching outcomes are (the better match of two mutants is the nearer)."""
    if a.kind != "value" or b.kind != "value":
        return 0.0
    pairs = [(x, y) for x, y in zip(_tensors(a.value), _tensors(b.value), strict=False) if x.shape == y.shape]
    worst = 0.0
    for x, y in pairs:
        if x.is_floating_point() and x.numel():
            diff = (x.double() - y.double()).nan_to_num(0.0, 0.0, 0.0).abs().max()
            worst = max(worst, float(diff))
    return worst if math.isfinite(worst) else 0.0


# -- helpers ------------------------------------------------------------------------------------
def _copied(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    return value


def _walk(value) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    else:
        yield value


def handles_in(value) -> list[Handle]:
    """The learner objects (their Handles) inside a request's fields or an answer."""
    return [v for v in _walk(value) if isinstance(v, Handle)]


def _tensors(value) -> list[torch.Tensor]:
    return [v for v in _walk(value) if isinstance(v, torch.Tensor)]


def _elements(value) -> int:
    return sum(t.numel() for t in _tensors(value))


def _uses(event: Event) -> list[tuple[int, int]]:
    """The learner objects an event reaches: its target and the handles among its arguments."""
    keys = [(event.generation, h.id) for h in handles_in(event.fields)]
    if "handle" in event.target:
        keys.insert(0, (event.generation, int(event.target["handle"])))
    return keys
