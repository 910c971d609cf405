"""The hidden tests' `submission` fixture without a jail: learner modules imported into this process.

For the benchmark's floor (row a) and the naive row (c) only. It answers the same calls as
grader.grading.session.SubmissionSession, with the learner's real objects instead of handles, and reuses
the worker's own operations so that both sides do the same work.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from grader.jail import wire

sys.modules.setdefault("wire", wire)           # worker.py imports wire as a top-level module
from grader.jail import worker as _worker  # noqa: E402
from grader.jail.client import LearnerError  # noqa: E402


def _is_data(value) -> bool:
    import numpy as np
    import torch
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor, np.ndarray)):
        return True
    if type(value) in (list, tuple):
        return all(_is_data(v) for v in value)
    if type(value) is dict:
        return all(_is_data(v) for v in value.values())
    return False


class Local:
    """A learner object in this process, behaving like grader.grading.session.Remote: exceptions the
    learner's code raises become LearnerError, objects that are not data stay wrapped."""

    def __init__(self, obj):
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return Local(getattr(self._obj, name))
        except Exception as exc:
            raise LearnerError(_worker.describe(exc)) from None

    def __call__(self, *args, **kwargs):
        args = [unwrap(a) for a in args]
        kwargs = {k: unwrap(v) for k, v in kwargs.items()}
        try:
            result = self._obj(*args, **kwargs)
        except Exception as exc:
            raise LearnerError(_worker.describe(exc)) from None
        return result if _is_data(result) else Local(result)


def unwrap(value):
    if isinstance(value, Local):
        return value._obj
    if type(value) in (list, tuple):
        return type(value)(unwrap(v) for v in value)
    if type(value) is dict:
        return {k: unwrap(v) for k, v in value.items()}
    return value


class InProcessSubmission:
    def __init__(self, root, modules):
        self.root = Path(root)
        self.toml = {}
        self._mods = {}
        for name in modules:
            spec = importlib.util.spec_from_file_location(name, self.root / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            finally:
                sys.modules.pop(name, None)
            self._mods[name] = module
        self._ops = _worker.Worker(str(self.root))
        _worker.ROOT = str(self.root)

    def __getattr__(self, name):
        mods = self.__dict__.get("_mods", {})
        if name in mods:
            return Local(mods[name])
        raise AttributeError(name)

    def module(self, name):
        return Local(self._mods.get(name) or importlib.import_module(name))

    def _target(self, obj):
        return {"handle": self._ops.to_handle(unwrap(obj)).id}

    def load(self, module, state_dict):
        state = {k: v.detach().clone() for k, v in state_dict.items()}
        result = self._ops.op_load({"target": self._target(module), "state": state})
        if "missing" in result or "shape" in result:
            raise AssertionError(f"could not load weights: {result}")

    def parameters(self, module):
        return self._ops.op_params({"target": self._target(module)})

    def state_dict(self, module):
        return self._ops.op_state({"target": self._target(module)})

    def fetch(self, value):
        return unwrap(value)

    def train_lm(self, model, data, *, steps, batch_size, block_size, lr, seed=0):
        return self._ops.op_train_lm({"target": self._target(model), "data": data, "steps": steps,
                                      "batch_size": batch_size, "block_size": block_size, "lr": lr,
                                      "seed": seed})
