"""Junk returned by learner code: a reference solution in which public functions and methods
return values of every kind that can cross the jail boundary (and some that cannot), each to be
graded as the learner's failure of the checks that call them, never as the grader's error.

A submission is the solution plus `replacement(...)` appended to one learner file: the replaced
name returns `JUNK[kind]`, an expression evaluated in the jail on every call, in which `_real()`
is what the honest code would have returned (for junk of the right shape and the wrong type).
"""
from dataclasses import dataclass

# kind -> an expression, evaluated in the jail at each call (`_real()`: the honest result)
JUNK = {
    "none": "None",
    "str": "'text'",
    "bytes": "b'bytes'",
    "int": "3",
    "huge-float": "1e308",
    "nan": "float('nan')",
    "bool": "True",
    "list": "[1, 2]",
    "ragged-list": "[[1.0, 2.0], [3.0]]",
    "dict": "{'a': 1}",
    "pair-of-none": "(None, None)",
    "one-tuple": "(_first_tensor(_real()),)",
    "triple": "(_first_tensor(_real()),) * 3",
    "retyped": "_retype(_real(), _float_to_int)",          # int64 where float is due, float where int
    "bool-tensor": "_retype(_real(), lambda t: t != 0)",
    "zero-d": "_torch.tensor(0.5)",
    "empty": "_torch.empty(0)",
    "sixteen-dims": "_torch.zeros([1] * 16)",
    "numpy-float32": "_np.zeros((2, 3), dtype=_np.float32)",
    "numpy-object": "_np.array([object(), 1], dtype=object)",
    "object": "object()",
    "module": "_torch.nn.Linear(2, 2)",
    "generator": "(i for i in range(3))",
    "torch-size": "_torch.Size([2, 3])",
    "complex": "_retype(_real(), lambda t: t.to(_torch.complex64))",
    "float16": "_retype(_real(), lambda t: t.to(_torch.float16))",
    "bfloat16": "_retype(_real(), lambda t: t.to(_torch.bfloat16))",
    "seventeen-dims": "_torch.zeros([1] * 17)",                   # cannot cross: the wire refuses it
    "self-containing-list": "_loop()",                             # cannot cross either
    "meta-tensor": "_torch.empty(2, 3, device='meta')",            # no data to send
}

# Junk that is right in value for some names (an honest int64 result "retyped" is another dtype,
# but an honest int stays as it is): graded, never as an internal error, not necessarily failed.
DERIVED = {"one-tuple", "triple", "retyped", "bool-tensor", "complex", "float16", "bfloat16"}

# A few kinds of each family, for the names swept more thinly.
SAMPLE = ["none", "one-tuple", "retyped", "object"]

PRELUDE = '''
# --- junk returns (tests/adversarial/junk.py) ---
import numpy as _np
import torch as _torch


def _first_tensor(value):
    while isinstance(value, (tuple, list)) and value:
        value = value[0]
    return value if isinstance(value, _torch.Tensor) else _torch.zeros(2)


def _float_to_int(t):
    return t.long() if t.is_floating_point() else t.float()


def _retype(value, change):
    if isinstance(value, _torch.Tensor):
        return change(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_retype(v, change) for v in value)
    return value


def _loop():
    items = [1]
    items.append(items)
    return items
'''


def replacement(name: str, kind: str) -> str:
    """Code that makes `name` (a function, `Class.method`, or a class) return JUNK[kind]."""
    expression = JUNK[kind]
    real = "_real_" + name.replace(".", "_")
    if "." in name:
        return f'''
{real} = {name}


def _junk_{real}(self, *a, **k):
    _real = lambda: {real}(self, *a, **k)  # noqa: E731
    return {expression}


{name} = _junk_{real}
'''
    return f'''
{real} = {name}


def {name}(*a, **k):
    _real = lambda: {real}(*a, **k)  # noqa: E731
    return {expression}
'''


@dataclass(frozen=True)
class Target:
    exercise: str
    file: str
    name: str                 # a function, `Class.method`, or a class (its constructor)
    checks: tuple[str, ...]   # checks that call it, each of which must fail on fixed junk


TARGETS = [
    # day45-attention
    Target("day45-attention", "attention.py", "stable_softmax",
           ("softmax-matches-reference", "softmax-large-logits", "softmax-all-minus-inf")),
    Target("day45-attention", "attention.py", "scaled_dot_product_attention",
           ("attention-matches-reference", "causal-attention-matches-reference",
            "causal-attention-has-no-future-leak", "attention-with-mask-and-fully-blocked-rows",
            "attention-in-half-precision")),
    Target("day45-attention", "attention.py", "split_heads", ("split-and-merge-heads",)),
    Target("day45-attention", "attention.py", "merge_heads", ("split-and-merge-heads",)),
    Target("day45-attention", "attention.py", "MultiHeadAttention.forward",
           ("mha-matches-reference", "mha-padding-mask", "mha-has-no-future-leak",
            "mha-is-permutation-equivariant")),
    Target("day45-attention", "attention.py", "MultiHeadAttention",
           ("mha-matches-reference", "mha-rejects-indivisible-heads", "mha-parameter-count")),
    # day48-decoder
    Target("day48-decoder", "norms.py", "LayerNorm.forward", ("layernorm-matches-reference",)),
    Target("day48-decoder", "norms.py", "RMSNorm.forward", ("rmsnorm-matches-reference",)),
    Target("day48-decoder", "norms.py", "LayerNorm", ("layernorm-matches-reference",)),
    Target("day48-decoder", "norms.py", "RMSNorm", ("rmsnorm-matches-reference",)),
    Target("day48-decoder", "gpt.py", "MLP", ("mlp-matches-reference",)),
    Target("day48-decoder", "gpt.py", "Block", ("block-is-pre-ln",)),
    Target("day48-decoder", "positions.py", "sinusoidal_positions", ("sinusoidal-positions",)),
    Target("day48-decoder", "positions.py", "apply_rope", ("apply-rope",)),
    Target("day48-decoder", "attention.py", "MultiHeadAttention.forward", ("mha-matches-reference",)),
    Target("day48-decoder", "gpt.py", "MLP.forward", ("mlp-matches-reference",)),
    Target("day48-decoder", "gpt.py", "Block.forward", ("block-is-pre-ln",)),
    Target("day48-decoder", "gpt.py", "GPT.forward",
           ("gpt-matches-reference", "gpt-has-no-future-leak", "weight-tying", "training-probe")),
    Target("day48-decoder", "gpt.py", "GPT", ("gpt-matches-reference", "count-parameters")),
    Target("day48-decoder", "gpt.py", "GPTConfig", ("gpt-matches-reference",)),
    Target("day48-decoder", "gpt.py", "count_parameters", ("count-parameters",)),
    # day49-data
    Target("day49-data", "data.py", "make_xy",
           ("make-xy-shifts-targets-by-one", "make-xy-targets-follow-the-corpus")),
    Target("day49-data", "data.py", "get_batch",
           ("get-batch-returns-int64", "get-batch-rows-are-shifted-windows",
            "get-batch-draws-every-start-uniformly", "get-batch-uses-the-generator")),
    Target("day49-data", "data.py", "lm_loss", ("lm-loss-is-a-mean",)),
    # day49-bughunt
    Target("day49-bughunt", "bughunt.py", "attention", ("attention-scale", "causal-mask")),
    Target("day49-bughunt", "bughunt.py", "Block.forward", ("block-is-pre-ln",)),
    Target("day49-bughunt", "bughunt.py", "GPT.forward", ("training-on-a-markov-corpus",)),
    Target("day49-bughunt", "bughunt.py", "make_xy", ("make-xy-shifts-targets",)),
    Target("day49-bughunt", "bughunt.py", "train", ("training-on-a-markov-corpus",)),
    Target("day49-bughunt", "bughunt.py", "get_batch", ()),
    Target("day49-bughunt", "bughunt.py", "CausalSelfAttention.forward", ()),
    Target("day49-bughunt", "bughunt.py", "MLP.forward", ()),
    Target("day49-bughunt", "bughunt.py", "GPT", ("training-on-a-markov-corpus",)),
    Target("day49-bughunt", "bughunt.py", "Block", ("block-is-pre-ln",)),
    Target("day49-bughunt", "bughunt.py", "GPTConfig", ("block-is-pre-ln", "training-on-a-markov-corpus")),
]

# What one submission replaces: names whose checks are disjoint, and none of which the others'
# honest code calls (so each check meets the junk of the one name it calls first).
FULL_SWEEP = [  # every kind of junk
    ("day45-attention", ("scaled_dot_product_attention", "split_heads")),
    ("day45-attention", ("MultiHeadAttention.forward",)),
    ("day48-decoder", ("GPT.forward", "count_parameters", "apply_rope")),
    ("day49-data", ("get_batch", "lm_loss")),
    ("day49-bughunt", ("attention", "make_xy")),
]
SAMPLE_SWEEP = [  # SAMPLE only
    ("day45-attention", ("stable_softmax",)),
    ("day45-attention", ("merge_heads",)),
    ("day45-attention", ("MultiHeadAttention",)),
    ("day48-decoder", ("LayerNorm.forward", "RMSNorm.forward", "sinusoidal_positions")),
    ("day48-decoder", ("MultiHeadAttention.forward", "MLP.forward")),
    ("day48-decoder", ("Block.forward", "LayerNorm")),
    ("day48-decoder", ("GPT", "GPTConfig")),
    ("day48-decoder", ("RMSNorm", "MLP")),
    ("day48-decoder", ("Block",)),
    ("day49-data", ("make_xy",)),
    ("day49-bughunt", ("train", "Block.forward")),
    ("day49-bughunt", ("GPT.forward", "get_batch")),
    ("day49-bughunt", ("CausalSelfAttention.forward", "MLP.forward")),
    ("day49-bughunt", ("GPT", "Block")),
    ("day49-bughunt", ("GPTConfig",)),
]


def target(exercise: str, name: str) -> Target:
    return next(t for t in TARGETS if t.exercise == exercise and t.name == name)
