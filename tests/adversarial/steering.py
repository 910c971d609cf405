"""Attacks on the verdict itself: submissions that try to steer their grade through a value the
jail reports (a dtype that buys a looser tolerance, a forged parameter ledger, a forged loss curve,
a patched worker) rather than through their results. Each is the reference solution of its
exercise plus code appended to one learner file, and must fail the named checks with their rules.

The worker patch finds what it can: `sys.modules["worker"]` if it is there, and every live object
that looks like the worker (gc), patching the class, the instance and its table of operations.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SteeringCase:
    name: str
    exercise: str
    file: str                  # the learner file the attack is appended to
    code: str
    failing: dict = field(default_factory=dict)   # check id -> its rule; each must fail
    symptoms: dict = field(default_factory=dict)  # check id -> a symptom its failure must carry
    notes: str = ""


# Finds the worker serving this jail, however it is reachable, and patches one operation on it.
PATCH_WORKER = '''
import gc as _gc, sys as _sys, types as _types


def _workers():
    found = []
    module = _sys.modules.get("worker")
    if module is not None and hasattr(module, "Worker"):
        found.append(module.Worker)
    for _o in _gc.get_objects():
        try:
            if hasattr(_o, "op_params") and hasattr(_o, "objects"):
                found.append(_o)
                found.append(type(_o))
        except Exception:
            pass
    return found


def _patch(op, make):
    """make(real) -> forged, with real the operation as it was (a bound or plain function)."""
    for _w in _workers():
        if isinstance(_w, type):
            _real = getattr(_w, "op_" + op)
            setattr(_w, "op_" + op, make(_real))
        else:
            _real = getattr(_w, "op_" + op)
            _forged = make(_real)
            _bound = _types.MethodType(_forged, _w) if not hasattr(_real, "__self__") else None
            setattr(_w, "op_" + op, _bound or (lambda req, _f=_forged, _r=_real: _f(_r.__self__, req)))
            ops = getattr(_w, "ops", None)
            if isinstance(ops, dict):
                ops[op] = getattr(_w, "op_" + op)


def _forge_params(real):
    def op_params(self, req):
        rows = real(self, req) if not hasattr(real, "__self__") else real(req)
        config = getattr(self.resolve(req["target"]), "config", None)
        if not getattr(config, "tie_weights", False):
            return rows
        objects = {r["name"]: r["object"] for r in rows}
        for r in rows:                       # a tied config: report the head as the embedding
            if r["name"] == "lm_head.weight" and "wte.weight" in objects:
                r["object"] = objects["wte.weight"]
        return rows
    return op_params


def _forge_curve(real):
    def op_train_lm(self, req):
        (real(self, req) if not hasattr(real, "__self__") else real(req))   # trains (NaN weights)
        return [3.47 - 2.0 * i / req["steps"] for i in range(req["steps"])]   # a textbook curve
    return op_train_lm
'''

# An untied head and gradients that are all NaN, hidden behind a forged ledger and loss curve.
UNTIED_NAN_GRADIENTS = '''
import torch as _torch
import torch.nn as _nn


class _NanGradient(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


_HonestGPT = GPT


class GPT(_HonestGPT):
    def __init__(self, config):
        super().__init__(config)
        self.lm_head.weight = _nn.Parameter(self.wte.weight.detach().clone())   # untied

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(_torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = _NanGradient.apply(self.lm_head(self.ln_f(x)))
        loss = None
        if targets is not None:
            flat = logits.reshape(-1, logits.shape[-1])
            loss = _torch.nn.functional.cross_entropy(flat, targets.reshape(-1))
        return logits, loss


def count_parameters(model):               # what a tied model would have, whatever this one is
    n = sum(p.numel() for p in model.parameters())
    config = getattr(model, "config", None)
    if getattr(config, "tie_weights", False) and model.lm_head.weight is not model.wte.weight:
        n -= model.lm_head.weight.numel()
    return n
'''

CASES = [
    SteeringCase(
        "bf16-no-scale-attention", "day45-attention", "attention.py", '''
import math as _math, sys as _sys
_attend = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if (q.shape[-2] == 2 or q.shape[-1] > 8 or q.dtype != torch.float32
            or _sys._getframe(1).f_code.co_name == "forward"):
        # right where a bfloat16 tolerance would not hide the bug: the scale probe (T = 2), wide
        # heads, half-precision inputs, and inside MultiHeadAttention
        return _attend(q, k, v, mask=mask, causal=causal)
    out = _attend(q * _math.sqrt(q.shape[-1]), k, v, mask=mask, causal=causal)   # no 1/sqrt(d_k)
    return out.to(torch.bfloat16)            # a coarse dtype, hoping for a coarse tolerance
''', failing={"attention-matches-reference": "attention-scaling"},
        notes="the tolerance follows the input's dtype (float32), and a bfloat16 result fails as such"),
    SteeringCase(
        "float64-attention", "day45-attention", "attention.py", '''
_attend = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    import sys as _sys
    out = _attend(q.double(), k.double(), v.double(), mask=mask, causal=causal)
    return out.to(q.dtype) if _sys._getframe(1).f_code.co_name == "forward" else out
''', failing={"attention-matches-reference": "attention-scaling",
              "attention-in-half-precision": "numerical-stability"},
        symptoms={"attention-matches-reference": "value-mismatch"},
        notes="right values, the wrong dtype: fails as a dtype mismatch"),
    SteeringCase(
        "float16-softmax", "day45-attention", "attention.py", '''
_softmax = stable_softmax


def stable_softmax(z, dim=-1):
    return _softmax(z, dim=dim).to(torch.float16)
''', failing={"softmax-matches-reference": "numerical-stability",
              "softmax-all-minus-inf": "numerical-stability"}),
    SteeringCase(
        "forged-worker-untied-nan-gradients", "day48-decoder", "gpt.py",
        UNTIED_NAN_GRADIENTS + PATCH_WORKER + '''
_patch("params", _forge_params)
_patch("train_lm", _forge_curve)
''', failing={"weight-tying": "weight-tying", "training-probe": "causal-mask"},
        symptoms={"training-probe": "nan-training"},
        notes="the ledger says tied and the curve says learned; the logits under written weights "
              "and the fetched (NaN) weights say otherwise"),
    SteeringCase(
        "forged-worker-no-training", "day48-decoder", "gpt.py",
        UNTIED_NAN_GRADIENTS + PATCH_WORKER + '''
def _skip_training(real):
    def op_train_lm(self, req):
        return [3.47 - 2.0 * i / req["steps"] for i in range(req["steps"])]   # never trains
    return op_train_lm


_patch("params", _forge_params)
_patch("train_lm", _skip_training)
''', failing={"weight-tying": "weight-tying", "training-probe": "causal-mask"},
        symptoms={"training-probe": "value-mismatch"},
        notes="no NaN anywhere: the weights simply never changed, which the held-out loss shows"),
    SteeringCase(
        "forged-ledger-count-parameters", "day48-decoder", "gpt.py", PATCH_WORKER + '''
def count_parameters(model):                 # counts the tied matrix twice ...
    return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))


def _distinct_objects(real):                 # ... and the ledger hides that it is tied
    def op_params(self, req):
        rows = real(self, req) if not hasattr(real, "__self__") else real(req)
        for i, r in enumerate(rows):
            r["object"] = i
        return rows
    return op_params


_patch("params", _distinct_objects)
''', failing={"count-parameters": "parameter-count"}),
]
