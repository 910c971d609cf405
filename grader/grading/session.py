"""The `submission` fixture of hidden tests: the learner's modules, reached through the jail.

    mha = submission.attention.MultiHeadAttention(8, 2)   # built in the jail, a handle here
    submission.load(mha, reference.state_dict())          # the grader's weights, by SPEC's names
    y = mha(x)                                            # x crosses as bytes, y comes back as bytes

Values that come back are plain Python data and this process's own tensors. A jail that dies is
replaced by a fresh one for the next check; the handles of the dead one stop working.

Each call has a time budget (grader.grading.budgets: a multiple of the reference's time for the same call,
with a floor); a call over it fails its check with where the learner's code was when it was
stopped. A learner module that cannot be used (its file has a problem, or its import raised) and a
name a module lacks fail only the checks that reach them (`submission.<module>.<name>`).
"""

from __future__ import annotations

import time
from pathlib import Path

from grader.errors import learner_text
from grader.grading.budgets import CallBudgets
from grader.grading.failures import Unusable
from grader.grading.replay import Event, Outcome, Trace, handles_in, outcome_of, raised
from grader.intake.submission import IN_CELL, line_of
from grader.jail.client import (
    CpuShare,
    Jail,
    JailCrash,
    JailError,
    JailTimeout,
    LearnerError,
    Limits,
    default_zygote,
    output_file,
    read_output,
    read_submission_files,
)
from grader.jail.wire import Handle
from grader.limits import CALL_FLOOR_SECONDS, JAIL_READY_SECONDS
from grader.locale import Message, msg


class Remote:
    """A learner object in the jail: a module attribute or a handle, plus an attribute path."""

    _session: SubmissionSession  # set with object.__setattr__: this class's own attributes
    _target: dict
    _label: str
    _type_name: str  # a handle's only: the type the jail reported, for messages

    def __init__(self, session: SubmissionSession, target: dict, label: str):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_label", label)

    def __getattr__(self, name: str) -> Remote:
        if name.startswith("__"):
            raise AttributeError(name)
        target = dict(self._target, path=[*self._target.get("path", []), name])
        return Remote(self._session, target, f"{self._label}.{name}")

    def __call__(self, *args, **kwargs):
        return self._session._call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<learner {self._label}>"


_frozen = False


def freeze_long_lived_objects() -> None:
    """Once per process: move what is alive now (torch, pytest, the reference) out of the garbage
    collector's reach. pytest runs gc.collect() twice per hidden-test run; with torch loaded each
    pass walks every object ever imported (about 0.25 s here) unless they are frozen."""
    global _frozen
    if not _frozen:
        import gc

        gc.freeze()
        _frozen = True


class SubmissionSession:
    def __init__(
        self,
        root: Path | None,
        modules: list[str],
        limits: Limits,
        generation: int = 0,
        zygote=None,
        files: dict[str, bytes] | None = None,
        names: dict[str, list[str]] | None = None,
        problems: dict[str, Message] | None = None,
        solution_dir: Path | None = None,
    ):
        """root: a folder holding the learner's files; or None, with `files` (name -> bytes).
        names: {module: [name]} that SPEC asks each module to define; see `missing`.
        problems: learner file name -> why that file cannot be used (SubmittedFiles.problems):
        such a module is not imported, and the checks that reach it fail with the problem.
        solution_dir: the exercise's solution, timed for calls `reference_model` has no
        counterpart of (see grader.grading.budgets)."""
        freeze_long_lived_objects()
        self.root = Path(root) if root is not None else None
        self.modules = list(modules)
        self.limits = limits
        self.started = time.monotonic()
        self.jail: Jail | None = None
        self.generation = generation  # bumps when a dead jail is replaced
        self.names = dict(names or {})
        self.import_errors: dict[str, dict | None] = {}
        self.missing: dict[str, list[str]] = {}  # of `names`, those a module does not define
        self.budget_exhausted = False
        self.jails_started = 0
        self._zygote = zygote
        self._files = dict(files) if files is not None else None
        # one output file for every jail of this submission: what each printed is kept, capped
        self._output = output_file()
        self.isolation = zygote.isolation if zygote is not None else "none"
        self._cpu = CpuShare()
        # requests whose answer only says whether they worked (loading weights): sent together
        # with the next request, or at the end of the check, to save a round trip each
        self._pending: list[tuple[dict, str, int]] = []
        self.toml: dict[str, dict] = {}  # the submission's TOML files, parsed (hidden tests read them)
        self.problems: dict[str, Message] = dict(problems or {})
        # module -> why it cannot be used: its file's problem now, its import error once ready
        self.broken: dict[str, Message] = {
            m: self.problems[f"{m}.py"] for m in self.modules if f"{m}.py" in self.problems
        }
        self.budgets = CallBudgets(self.modules, limits.call_seconds, solution_dir)
        self.trace = Trace()  # every check's requests and answers, to name a failed check's bug

    def begin_check(self, check: str) -> None:
        """The requests from now on are `check`'s (the runner calls this before each check)."""
        self.trace.begin(check)

    # -- jail lifecycle ---------------------------------------------------------------------------------
    def budget_left(self) -> float:
        return self.limits.wall_seconds - (time.monotonic() - self.started)

    def _timeout(self, budget: float | None = None) -> float:
        """The wait for one reply: the call's budget (call_seconds if none), within what is left
        of the submission's wall_seconds."""
        left = self.budget_left()
        if left <= 0:
            self.budget_exhausted = True
            raise JailTimeout(
                msg("the submission used up its {seconds:.0f} s", seconds=self.limits.wall_seconds)
            )
        return min(left, self.limits.call_seconds if budget is None else budget)

    def start(self) -> None:
        """Start the jail and let it import the learner's modules while the caller goes on."""
        self._jail(wait=False)

    def ensure_jail(self) -> Jail:
        """A live jail with the learner's modules imported (import_errors and missing set)."""
        return self._jail(wait=True)

    def _jail(self, wait: bool) -> Jail:
        if self.jail is not None and self.jail.alive:
            if wait and self.jail.info is None:
                self._ready(self.jail)
            return self.jail
        if self.jail is not None:
            self.jail.close()
            self.jail = None
            self.generation += 1
        timeout = self._timeout()
        zygote = self._zygote or default_zygote()
        self.isolation = zygote.isolation
        if self._files is None:
            assert self.root is not None, "a session given no files reads them from its root"
            self._files = read_submission_files(self.root)
        self.jail = Jail(
            self.root,
            self.limits,
            output=self._output,
            zygote=zygote,
            files=self._files,
            cpu=self._cpu.take(),
            modules=[m for m in self.modules if m not in self.problem_modules()],
            names=self.names,
            wait=False,
            timeout=timeout,
        )
        self.jails_started += 1
        if wait:
            self._ready(self.jail)
        return self.jail

    def _ready(self, jail: Jail) -> None:
        # the jail's start and the learner's imports: as long as a jail's start-up may take
        info = jail.wait_ready(self._timeout(min(self.limits.call_seconds, JAIL_READY_SECONDS)))
        imports, missing = info.get("imports", {}), info.get("missing", {})
        # the learner's code ran before this reply was sent: check its shape before using it
        if not (
            isinstance(imports, dict)
            and isinstance(missing, dict)
            and all(e is None or isinstance(e, dict) for e in imports.values())
            and all(isinstance(n, list) and all(isinstance(x, str) for x in n) for n in missing.values())
        ):
            raise broke_protocol(jail, msg("a malformed ready reply"))
        if self.generation > 0:
            # a module broken in the first jail stays broken (its checks fail with that); one
            # that imported then and fails now is not the same code twice: this check fails
            failed = {m: e for m, e in imports.items() if e is not None and self.import_errors.get(m) is None}
            if failed:
                module, error = next(iter(failed.items()))
                text = learner_text(error)
                raise JailCrash(
                    msg(
                        "importing {module}.py again in a fresh jail raised {type}: {message}",
                        module=module,
                        type=str(error.get("type")),
                        message=text if isinstance(text, Message) else text[:500],
                    )
                )
            return
        self.import_errors = dict(imports)
        self.missing = {m: list(n) for m, n in missing.items()}
        for module, error in self.import_errors.items():
            if error is not None and module not in self.broken:
                self.broken[module] = import_problem(module, error, self._files)[1]

    @property
    def files(self) -> dict[str, bytes]:
        """The learner's files as the jail got them (none before it started)."""
        return self._files or {}

    def problem_modules(self) -> set[str]:
        """The learner modules whose file has a problem: never imported."""
        return {m for m in self.modules if f"{m}.py" in self.problems}

    def request(self, op: str, budget: float | None = None, **fields):
        """One request; `budget`: its seconds (default: the floor, for the grader's own requests
        that run little learner code: attributes, parameters, state)."""
        jail = self.ensure_jail()
        budget = CALL_FLOOR_SECONDS if budget is None else budget
        if not self._pending:
            return jail.request(op, self._timeout(budget), **fields)
        return self._send_pending(jail, {"op": op, **fields}, budget)

    def flush(self) -> None:
        """Send what is pending (end of a check): a load that fails fails the check that asked."""
        if self._pending:
            self._send_pending(self.ensure_jail(), None)

    def discard_pending(self) -> None:
        self._pending.clear()

    def drop_broken_jail(self) -> None:
        """Before a check: a jail that spoke unasked or died since the last reply is replaced."""
        if self.jail is not None:
            self.jail.drop_if_broken()

    def _send_pending(self, jail: Jail, then: dict | None, budget: float = CALL_FLOOR_SECONDS):
        pending, self._pending = self._pending, []
        if any(generation != self.generation for _, _, generation in pending):
            raise JailError(msg("this object lived in a jail that has since died"))
        requests = [r for r, _, _ in pending] + ([then] if then is not None else [])
        result = jail.request("batch", self._timeout(CALL_FLOOR_SECONDS + budget), requests=requests)
        done = result.get("done") if isinstance(result, dict) else None
        if not isinstance(done, list) or not done or len(done) > len(requests):
            raise broke_protocol(jail, msg("a malformed batch reply"))
        for (_, label, _), answer in zip(pending, done, strict=False):  # done may stop short
            try:
                _check_loaded(answer, label)
            except JailCrash:
                jail.kill()
                raise
        if then is None:
            return None
        if len(done) < len(requests):  # a load failed; _check_loaded has said so
            raise broke_protocol(jail, msg("a batch that stopped without a reason"))
        return done[-1]

    def close(self) -> None:
        if self.jail is not None:
            self.jail.close()
            self.jail = None
        self._cpu.release()
        if not self._output.closed:
            self._output.close()

    def output(self):
        """What the submission's jails printed: a models.Printed (start, end, bytes cut)."""
        return read_output(self._output, self.limits.output_bytes)

    # -- what hidden tests use ----------------------------------------------------------------
    def __getattr__(self, name: str) -> Remote:
        if name in self.__dict__.get("modules", ()):
            return Remote(self, {"module": name, "generation": self.generation}, name)
        raise AttributeError(name)

    def module(self, name: str) -> Remote:
        return Remote(self, {"module": name, "generation": self.generation}, name)

    def load(self, remote: Remote, state_dict: dict) -> None:
        """Copy the grader's weights into a learner module, by SPEC's attribute names.

        Sent with the next request (or at the end of the check): if the learner's module lacks a
        name or a shape differs, that request raises the AssertionError, within the same check."""
        state = {k: v.detach().clone() for k, v in state_dict.items()}
        target = self._target(remote)
        self._pending.append(
            ({"op": "load", "target": target, "state": state}, remote._label, self.generation)
        )
        self.trace.record("load", target, self.generation, {"state": state}, None)

    def parameters(self, remote: Remote) -> list[dict]:
        """[{name, shape, dtype, object}] with `object` equal for entries that share a Parameter."""
        return self._recorded("params", self._target(remote), {}, _is_parameter_rows)

    def state_dict(self, remote: Remote) -> dict:
        return self._recorded("state", self._target(remote), {}, _is_state)

    def fetch(self, remote: Remote):
        """The value of a learner attribute, as plain data."""
        return self._recorded("get", self._target(remote), {}, None)

    def train_lm(
        self, model: Remote, data, *, steps: int, batch_size: int, block_size: int, lr: float, seed: int = 0
    ) -> list[float]:
        target = self._target(model)
        budget = self.budgets.for_training(self.generation, target, steps, batch_size, block_size)
        fields = dict(data=data, steps=steps, batch_size=batch_size, block_size=block_size, lr=lr, seed=seed)
        what = msg("training {model} for {steps} steps", model=model._label, steps=steps)
        return self._recorded("train_lm", target, fields, _is_losses, what=what, budget=budget)

    def rerun(self, events: list[Event], seconds: float) -> list[Outcome] | None:
        """Requests a check made, sent again (an input that tells known bugs apart, after the
        checks): one Outcome per request, the learner objects they make standing in for those
        the original requests made. Not recorded; None when the jail cannot answer them all
        (a training run is not sent again) or `seconds` run out."""
        deadline = time.monotonic() + seconds
        made: dict[tuple[int, int], Handle] = {}  # the original (generation, handle) -> this run's

        def ours(value, generation: int):
            if isinstance(value, Handle):
                return made[(generation, value.id)]
            if isinstance(value, (list, tuple)):
                return type(value)(ours(v, generation) for v in value)
            if isinstance(value, dict):
                return {k: ours(v, generation) for k, v in value.items()}
            return value

        outcomes: list[Outcome] = []
        try:
            for event in events:
                left = deadline - time.monotonic()
                if left <= 0 or event.op not in ("call", "load", "get", "params", "state"):
                    return None
                target = dict(event.target)
                if "handle" in target:
                    target["handle"] = made[(event.generation, int(target["handle"]))].id
                fields = ours(event.fields, event.generation)
                # the grader's time, after the checks: the submission's wall budget is not spent
                timeout = min(left, self.limits.call_seconds)
                try:
                    reply = self.ensure_jail().request(event.op, timeout, target=target, **fields)
                except LearnerError as exc:
                    outcomes.append(raised(exc.type_name))
                    continue
                outcome = outcome_of(reply) if event.outcome is not None else Outcome("opaque")
                if event.outcome is not None and event.outcome.kind == "value":
                    for theirs, new in zip(handles_in(event.outcome.value), handles_in(reply), strict=False):
                        made[(event.generation, theirs.id)] = new
                outcomes.append(outcome)
        except (JailError, KeyError):
            return None
        return outcomes

    # -- internals ----------------------------------------------------------------------------
    def _recorded(self, op: str, target: dict, fields: dict, is_well_formed=None, what=None, budget=None):
        """One request, kept in the trace with its answer (grader.grading.replay): a learner's exception
        as its type; the jail's own trouble (a timeout, a crash) ends the check's recording."""
        generation = self.generation
        try:
            if what is None:
                reply = self.request(op, budget, target=target, **fields)
            else:
                reply = self._timed(what, budget, op, target=target, **fields)
            if is_well_formed is not None:
                reply = self._shaped(reply, is_well_formed, op)
        except LearnerError as exc:
            self.trace.record(op, target, generation, fields, raised(exc.type_name))
            raise
        except BaseException:
            self.trace.stop()
            raise
        self.trace.record(op, target, generation, fields, outcome_of(reply))
        return reply

    def _shaped(self, reply, is_well_formed, op: str):
        """A reply of an operation whose answer the worker shapes (not the learner's own value):
        any other shape is the jail breaking the protocol, in the check that asked."""
        if not is_well_formed(reply):
            raise broke_protocol(self.jail, msg("a {op} reply of the wrong shape", op=op))
        return reply

    def _target(self, remote: Remote) -> dict:
        target = dict(remote._target)
        if "module" in target:  # a module is the same in every jail: only handles die with theirs
            target.pop("generation", None)
            self._usable(str(target["module"]), target.get("path", []))
            return target
        if target.pop("generation", self.generation) != self.generation:
            raise JailError(msg("this object lived in a jail that has since died"))
        return target

    def _usable(self, module: str, path: list) -> None:
        """A check that reaches a broken module, or a name it lacks, fails here, with why; the
        checks that do not reach them run as usual."""
        if module not in self.modules:
            return  # torch, numpy: not the learner's
        self.ensure_jail()  # the import's outcome decides

        if module in self.broken:
            raise Unusable(self.broken[module], symptoms=["exception"])
        lacking = self.missing.get(module, [])
        if path and path[0] in lacking:
            raise Unusable(
                msg(
                    "{file} does not define {missing} (the exercise asks for {names}; see the starter's "
                    "docstrings)",
                    file=f"{module}.py",
                    missing=str(path[0]),
                    names=", ".join(self.names.get(module, [])),
                ),
                symptoms=["exception"],
            )

    def toml_file(self, name: str) -> dict:
        """A learner TOML file, parsed; a file that did not parse (or is missing) fails the check
        that reads it, with its located problem, and only that check."""
        if name in self.toml:
            return self.toml[name]

        problem = self.problems.get(name) or msg(
            "missing file: {missing} (this exercise needs {files})", missing=name, files=name
        )
        raise Unusable(problem, symptoms=["exception"])

    def _call(self, remote: Remote, args, kwargs):
        target = self._target(remote)
        args = [_unwrap(self, a) for a in args]
        kwargs = {k: _unwrap(self, v) for k, v in kwargs.items()}
        generation = self.generation
        budget = self.budgets.for_call(generation, target, args, kwargs)
        label = remote._label if remote._label.endswith(")") else f"{remote._label}(...)"
        result = self._recorded("call", target, {"args": args, "kwargs": kwargs}, what=label, budget=budget)
        if isinstance(result, Handle):
            self.budgets.made(generation, result, target, args, kwargs)
        return _wrap(self, result, remote._label)

    def _timed(self, what, budget: float, op: str, **fields):
        """A request that runs the learner's code for as long as `budget`: over it, the error
        says which call, its budget, and (JailTimeout.where) where the code was."""
        left = self.budget_left()
        try:
            return self.request(op, budget, **fields)
        except JailTimeout as exc:
            if exc.where is None or left < budget:  # the submission's whole budget ran out first
                self.budget_exhausted = True
                raise
            raise JailTimeout(
                msg("{call} ran over its {seconds:g} s budget", call=what, seconds=round(budget, 1)),
                where=exc.where,
            ) from None


def import_problem(module: str, error: dict, files=None) -> tuple[str, Message]:
    """(error kind, message) of a learner module whose import raised in the jail. `files` (the
    submission's): a line of a file assembled from a notebook is named as its cell's too."""
    kind = "memory" if error.get("memory") else "crash"
    text = learner_text(error)
    if error.get("where"):
        where: str | Message = str(error["where"])
        file, _, line = str(where).rpartition(":")
        if files and file in files and line.isdigit():
            cell = line_of(file, files[file], int(line))
            where = msg("{where} ({cell})", where=where, cell=cell) if cell.msgid == IN_CELL else where
        return kind, msg(
            "importing {module}.py raised {type} at {where}: {message}",
            module=module,
            type=str(error.get("type")),
            where=where,
            message=text,
        )
    return kind, msg(
        "importing {module}.py raised {type}: {message}",
        module=module,
        type=str(error.get("type")),
        message=text,
    )


def broke_protocol(jail: Jail | None, detail) -> JailCrash:
    """The error of a jail whose reply breaks the protocol; the jail is killed first, so the next
    check runs in a fresh one (one place for every reply a session checks)."""
    if jail is not None:
        jail.kill()
    return JailCrash(msg("the jail broke the protocol ({detail})", detail=detail))


def _is_parameter_rows(rows) -> bool:
    return isinstance(rows, list) and all(
        isinstance(r, dict)
        and isinstance(r.get("name"), str)
        and isinstance(r.get("shape"), list)
        and all(type(n) is int for n in r["shape"])
        and isinstance(r.get("dtype"), str)
        and type(r.get("object")) is int
        for r in rows
    )


def _is_state(state) -> bool:
    import torch

    return isinstance(state, dict) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    )


def _is_losses(losses) -> bool:
    return isinstance(losses, list) and all(type(x) in (int, float) for x in losses)


def _check_loaded(answer, label: str) -> None:
    if not isinstance(answer, dict):
        raise JailCrash(
            msg("the jail broke the protocol ({detail})", detail=msg("a load answered with no record"))
        )
    if "missing" in answer:
        missing = [str(n) for n in answer["missing"]][:5] if isinstance(answer["missing"], list) else []
        raise AssertionError(
            msg(
                "{module} has no parameter named {names}; the exercise fixes these attribute names (see "
                "the starter's docstrings) so the grader can load the same weights into your module and "
                "the reference",
                module=label,
                names=", ".join(missing),
            )
        )
    if "shape" in answer:
        try:
            name, theirs, ours = answer["shape"]
        except (TypeError, ValueError):
            raise JailCrash(
                msg("the jail broke the protocol ({detail})", detail=msg("a malformed load answer"))
            ) from None
        raise AssertionError(
            msg(
                "{module}.{name} has shape {theirs}; expected {ours}",
                module=label,
                name=str(name),
                theirs=str(theirs),
                ours=str(ours),
            )
        )


def _unwrap(session: SubmissionSession, value):
    if isinstance(value, Remote):
        target = session._target(value)
        if "handle" in target and not target.get("path"):
            return Handle(target["handle"], "")
        raise TypeError(f"only whole learner objects can be passed back, not {value._label}")
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(session, v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(session, v) for k, v in value.items()}
    return value


def _wrap(session: SubmissionSession, value, label: str):
    if isinstance(value, Handle):
        remote = Remote(session, {"handle": value.id, "generation": session.generation}, f"{label}(...)")
        object.__setattr__(remote, "_type_name", value.type_name)  # for messages (testkit.type_name)
        return remote
    if isinstance(value, list):
        return [_wrap(session, v, label) for v in value]
    if isinstance(value, tuple):
        return tuple(_wrap(session, v, label) for v in value)
    if isinstance(value, dict):
        return {k: _wrap(session, v, label) for k, v in value.items()}
    return value


__all__ = ["JailError", "LearnerError", "Limits", "Remote", "SubmissionSession"]
