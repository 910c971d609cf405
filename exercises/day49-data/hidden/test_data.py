"""Hidden tests for day49-data: the learner's data.py (make_xy, get_batch, lm_loss) against
reference_model and the contract of SPEC.md (day 49, activity 1)."""
import math
from collections import Counter

import numpy as np
import torch
from hypothesis import strategies as st

import reference_model as ref
from grader.testkit import (
    CheckFailure,
    COLLAPSE_MARGIN,
    PROBE_BRANCHING,
    LearnerError,
    check,
    expect_close,
    expect_raises,
    expect_shape,
    fail,
    conditioned_tolerance,
    explore,
    magnitudes,
    markov_corpus,
    msg,
    random_tensor,
    seeds,
    sizes,
    tolerance,
    type_name,
)

FLATTEN_HINT = msg("F.cross_entropy wants logits of shape (N, V) against targets of shape (N,); "
                   "given (B, T, V) logits it reads dim 1 (T) as the classes. Flatten batch and time "
                   "into one axis: F.cross_entropy(logits.view(-1, V), targets.view(-1)).")
WINDOW_HINT = msg("A window starting at i needs block_size + 1 tokens (x = data[i : i + block_size] "
                  "and one more for the last target), so the valid starts are 0 .. len(data) - "
                  "block_size - 1. torch.randint(len(data) - block_size, (batch_size,)) draws exactly "
                  "those (its upper bound is exclusive); a start of len(data) - block_size makes y "
                  "run off the end.")


def randn(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(torch.float32)


def distinct_tokens(n: int, seed: int = 0) -> np.ndarray:
    """n different token ids, so the first token of a row tells where its window starts."""
    return np.random.default_rng(seed).permutation(5_000)[:n].astype(np.int64)


def show(values, limit: int = 8) -> str:
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    return str(values) if len(values) <= limit else f"[{', '.join(map(str, values[:limit]))}, ...]"


def learner_call(call, what: str, hint: str = "", symptoms=("exception",)):
    """Call into the jail; a learner exception on valid input fails the check with a hint."""
    try:
        return call()
    except LearnerError as exc:
        if exc.is_a("NotImplementedError"):
            raise
        if exc.where:
            message = msg("{what} raised {type} at {where}: {message}. {hint}", what=what,
                          type=exc.type_name, where=str(exc.where), message=exc.learner_message,
                          hint=hint)
        else:
            message = msg("{what} raised {type}: {message}. {hint}", what=what, type=exc.type_name,
                          message=exc.learner_message, hint=hint)
        fail(message, symptoms=list(symptoms))


def xy_pair(result, what: str, shape) -> tuple[torch.Tensor, torch.Tensor]:
    """The learner's (x, y): a pair of torch tensors of the given shape."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail(msg("{what} returned a {type}; expected a pair (x, y) of tensors", what=what,
                 type=type_name(result)), symptoms=["shape-mismatch"])
    x, y = result
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            fail(msg("{what} returned {name} as a {type}; return torch tensors "
                     "(torch.as_tensor(...) or torch.from_numpy(...)), which a model can take",
                     what=what, name=name, type=type_name(t)),
                 symptoms=["shape-mismatch"])
    return (expect_shape(x, shape, msg("{what}'s x", what=what)),
            expect_shape(y, shape, msg("{what}'s y", what=what)))


def unshifted(what: str, x, shifted_y, fix: str, *, diagnose: bool):
    message = msg("{what} returned y = {y}, the same tokens as x. The target at position t must be "
                  "the NEXT token, so y should be {shifted}. With y = x a causal model only has to "
                  "copy its input: the training loss collapses toward 0 while it learns nothing "
                  "about predicting the next token. {fix}", what=what, y=show(x),
                  shifted=show(shifted_y), fix=fix)
    diagnosis = [{"rule": "target-shift", "day": 49, "mutant": None,
                  "message": msg("targets are not shifted by one (y = x): the loss collapses "
                                 "toward 0")}]
    fail(message, symptoms=["loss-collapse"], diagnosis=diagnosis if diagnose else ())


# -- make_xy (target-shift) ------------------------------------------------------------------------

MAKE_XY_CASES = [   # (how the chunk is given, chunk): every form a chunk comes in, L = 1, odd and even L
    (msg("a list"), [502, 1204, 33, 991, 88]),                             # the seed's example
    (msg("a list"), [7, 11]),                                              # L = 1
    (msg("a numpy int64 array"), distinct_tokens(17, seed=1)),
    (msg("a numpy int64 array"), distinct_tokens(2, seed=4)),
    (msg("a numpy int32 array"), distinct_tokens(9, seed=2).astype(np.int32)),
    (msg("a numpy int32 array"), distinct_tokens(12, seed=5).astype(np.int32)),
    (msg("a numpy int32 array"), distinct_tokens(2, seed=6).astype(np.int32)),
    (msg("an int64 tensor"), torch.from_numpy(distinct_tokens(33, seed=3))),
    (msg("an int64 tensor"), torch.from_numpy(distinct_tokens(64, seed=7))),
    (msg("an int64 tensor of 2 tokens"), torch.tensor([7, 11])),           # L = 1
]


def shifted_twice(result, chunk) -> bool:
    """Whether make_xy's x starts the chunk and its y is chunk[2:]: the targets shifted by two
    (e.g. x, y = chunk[:-2], chunk[2:], or chunk[1:] shifted once more)."""
    if not isinstance(result, (tuple, list)) or len(result) != 2 or len(chunk) < 4:
        return False
    x, y = result
    tokens = torch.as_tensor(np.asarray(chunk)).long()
    return (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dim() == 1
            and 0 < len(x) <= len(tokens) and torch.equal(x.long(), tokens[:len(x)])
            and y.shape == tokens[2:].shape and torch.equal(y.long(), tokens[2:]))


@check(points=2, rule="target-shift", day=49, title="make_xy: y is x shifted by one")
def test_make_xy_shifts_targets_by_one(submission):
    for label, chunk in MAKE_XY_CASES:
        L = len(chunk) - 1
        what = msg("make_xy({chunk}) (a chunk of {n} tokens given as {label})", chunk=show(chunk),
                   n=L + 1, label=label)
        result = learner_call(lambda: submission.data.make_xy(chunk), what,
                              hint=msg("make_xy must accept a list, a numpy array or a tensor "
                                       "(torch.as_tensor(np.asarray(chunk)) handles all three)."))
        want_x, want_y = ref.make_xy(chunk)
        if shifted_twice(result, chunk):
            fail(msg("{what} returned y = {y}, the tokens two places after x: the targets are "
                     "shifted twice. y[t] must be the token right after x[t], y = chunk[1:] = "
                     "{expected}, and x = chunk[:-1]. Shift once, in one place.", what=what,
                     y=show(result[1]), expected=show(want_y)),
                 symptoms=["value-mismatch"],
                 diagnosis=[{"rule": "target-shift", "day": 49, "mutant": None,
                             "message": msg("targets shifted twice (y = chunk[2:]): the model "
                                            "learns to predict two tokens ahead")}])
        x, y = xy_pair(result, what, (L,))
        if torch.equal(y.long(), x.long()):
            # a make_xy with y = x is named by the unshifted-targets mutant it matches
            unshifted(what, y, want_y, msg("Use x = chunk[:-1], y = chunk[1:]."), diagnose=False)
        if not torch.equal(x.long(), want_x):
            fail(msg("{what} returned x = {x}; x is every token but the last, chunk[:-1] = "
                     "{expected}", what=what, x=show(x), expected=show(want_x)),
                 symptoms=["value-mismatch"])
        if not torch.equal(y.long(), want_y):
            fail(msg("{what} returned y = {y}; y[t] is the token after x[t], so y = chunk[1:] = "
                     "{expected}", what=what, y=show(y), expected=show(want_y)),
                 symptoms=["value-mismatch"])


@check(points=1, rule="data-windows", day=49, title="make_xy returns int64 x and y, whatever the chunk's dtype",
       needs=("make-xy-shifts-targets-by-one",))
def test_make_xy_returns_int64(submission):
    # The dtype is make_xy's output contract (rule data-windows, as for get_batch); whether the
    # shift is right is the check above's.
    for label, chunk in MAKE_XY_CASES:
        what = msg("make_xy({chunk}) (a chunk of {n} tokens given as {label})", chunk=show(chunk),
                   n=len(chunk), label=label)
        x, y = xy_pair(learner_call(lambda: submission.data.make_xy(chunk), what), what,
                       (len(chunk) - 1,))
        for name, t in (("x", x), ("y", y)):
            if t.dtype != torch.int64:
                fail(msg("{what} returned {name} as {dtype}; token ids must be int64, which "
                         "F.cross_entropy needs for its targets. Convert with .long() or "
                         ".astype(np.int64).", what=what, name=name,
                         dtype=str(t.dtype).replace('torch.', '')), got=str(t.dtype))


@check(points=2, rule="target-shift", day=49, title="on a Markov corpus, y[t] is what follows x[t]",
       needs=("make-xy-shifts-targets-by-one",))
def test_make_xy_targets_follow_the_corpus(submission):
    # Every token of this corpus has 4 equally likely successors: no next-token predictor can
    # average below ln 4 nats, and the (x[t], y[t]) pairs of a correct make_xy are its bigrams.
    L, n_chunks = 64, 40
    corpus, floor = markov_corpus(64, PROBE_BRANCHING, n_chunks * (L + 1), seed=49)
    bigrams = set(zip(corpus[:-1].tolist(), corpus[1:].tolist()))
    pairs = []
    for n in range(n_chunks):
        chunk = corpus[n * (L + 1):(n + 1) * (L + 1)]
        what = msg("make_xy(chunk {n} of a Markov corpus)", n=n)
        x, y = xy_pair(learner_call(lambda: submission.data.make_xy(chunk), what), what, (L,))
        pairs += zip(x.tolist(), y.tolist())
    entropy = conditional_entropy(pairs)
    if entropy < floor - COLLAPSE_MARGIN:
        copied = sum(a == b for a, b in pairs) / len(pairs)
        fail(msg("on a corpus where every token has {branching} equally likely successors, no "
                 "next-token predictor can average below ln {branching} = {floor:.3f} nats. With "
                 "your make_xy's pairs, y[t] given x[t] has an entropy of only {entropy:.3f} nats "
                 "({copied:.0%} of the targets are x[t] itself): a model trained on them learns to "
                 "copy its input and its loss collapses below what the data allows, toward 0, "
                 "while it learns nothing about the next token. Shift the targets: y = chunk[1:].",
                 branching=PROBE_BRANCHING, floor=floor, entropy=abs(entropy), copied=copied),
             symptoms=["loss-collapse"], entropy=entropy, floor=floor)
    wrong = [p for p in pairs if p not in bigrams]
    if wrong:
        fail(msg("{wrong} of the {pairs} pairs (x[t], y[t]) from your make_xy never occur as "
                 "consecutive tokens in the corpus (e.g. {example}): y[t] must be the token right "
                 "after x[t]. Use x = chunk[:-1], y = chunk[1:].", wrong=len(wrong),
                 pairs=len(pairs), example=wrong[0]), symptoms=["value-mismatch"])


def conditional_entropy(pairs) -> float:
    """H(y | x) in nats of the empirical distribution of (x, y) pairs: the best loss any model
    that sees x[t] can reach on them."""
    joint, context = Counter(pairs), Counter(a for a, _ in pairs)
    n = len(pairs)
    return -sum(c / n * math.log(c / context[a]) for (a, _), c in joint.items())


# -- get_batch (data-windows) ----------------------------------------------------------------------

def call_get_batch(submission, data, batch_size: int, block_size: int, hint: str = WINDOW_HINT,
                   **kwargs):
    """The learner's get_batch on valid input; an exception fails with the hint that fits it."""
    if isinstance(data, torch.Tensor):
        what = msg("get_batch(data = a tensor of {n} tokens, batch_size={batch_size}, "
                   "block_size={block_size})", n=len(data), batch_size=batch_size,
                   block_size=block_size)
    else:
        what = msg("get_batch(data = a numpy array of {n} tokens, batch_size={batch_size}, "
                   "block_size={block_size})", n=len(data), batch_size=batch_size,
                   block_size=block_size)
    try:
        result = submission.data.get_batch(data, batch_size, block_size, **kwargs)
    except LearnerError as exc:
        if exc.is_a("NotImplementedError"):
            raise
        if exc.is_a("TypeError") and "generator" in kwargs:
            hint = msg("get_batch takes generator=None (a torch.Generator) and passes it on: "
                       "torch.randint(..., generator=generator).")
        elif exc.is_a("TypeError") and isinstance(data, torch.Tensor):
            hint = msg("get_batch must accept a tensor as well as a numpy array "
                       "(torch.as_tensor(data) takes both).")
        if exc.where:
            message = msg("{what} raised {type} at {where}: {message}. {hint}", what=what,
                          type=exc.type_name, where=str(exc.where), message=exc.learner_message,
                          hint=hint)
        else:
            message = msg("{what} raised {type}: {message}. {hint}", what=what, type=exc.type_name,
                          message=exc.learner_message, hint=hint)
        fail(message, symptoms=["exception"])
    x, y = xy_pair(result, what, (batch_size, block_size))
    return x, y, what


def window_starts(x, y, data, block_size: int, what: str, diagnose: bool = False) -> list[int]:
    """Where each row's window starts in `data` (distinct tokens), or a failure that says why not."""
    tokens = torch.as_tensor(data).tolist()
    N, T = len(tokens), block_size
    position = {tok: i for i, tok in enumerate(tokens)}
    starts = []
    for r, (row_x, row_y) in enumerate(zip(x.tolist(), y.tolist())):
        i = position.get(row_x[0])
        if i is None or row_x != tokens[i:i + T]:
            fail(msg("row {r} of {what}'s x is {x}, which is not a window of data: each row must "
                     "be block_size consecutive tokens data[i : i + block_size] (tokens, not "
                     "positions). A window that runs past the end of data (wrapped around or "
                     "padded) is not one either.", r=r, what=what, x=show(row_x)),
                 symptoms=["value-mismatch"], row=r)
        if row_y == row_x:
            unshifted(msg("{what} (row {r})", what=what, r=r), row_x, tokens[i + 1:i + 1 + T],
                      msg("Use x = data[i : i + block_size], y = data[i + 1 : i + 1 + block_size]."),
                      diagnose=diagnose)
        if i > N - T - 1:
            fail(msg("row {r} of {what} starts at i = {i}, but with len(data) = {N} and block_size "
                     "= {T} the last valid start is len(data) - block_size - 1 = {last}: its last "
                     "target would be data[{end}], past the end, so y ran off the end of data "
                     "(y = {y}). {hint}", r=r, what=what, i=i, N=N, T=T, last=N - T - 1, end=i + T,
                     y=show(row_y), hint=WINDOW_HINT),
                 symptoms=["value-mismatch"], row=r, start=i)
        if row_y == tokens[i + 2:i + 2 + T]:
            fail(msg("row {r} of {what}: x = data[{i}:{i_end}] but y = data[{k}:{k_end}], the "
                     "tokens two places after x: the targets are shifted twice. y must be x "
                     "shifted by one, data[{j}:{j_end}]. Shift once, in one place.", r=r,
                     what=what, i=i, i_end=i + T, k=i + 2, k_end=i + 2 + T, j=i + 1, j_end=i + 1 + T),
                 symptoms=["value-mismatch"], row=r,
                 diagnosis=[{"rule": "target-shift", "day": 49, "mutant": None,
                             "message": msg("targets shifted twice (y = data[i + 2 : i + 2 + "
                                            "block_size]): the model learns to predict two tokens "
                                            "ahead")}] if diagnose else ())
        if row_y != tokens[i + 1:i + 1 + T]:
            fail(msg("row {r} of {what}: x = data[{i}:{i_end}] but y = {y}; y must be x shifted by "
                     "one, data[{j}:{j_end}] = {expected}.", r=r, what=what, i=i, i_end=i + T,
                     y=show(row_y), j=i + 1, j_end=i + 1 + T, expected=show(tokens[i + 1:i + 1 + T])),
                 symptoms=["value-mismatch"], row=r)
        starts.append(i)
    return starts


def seed_jail(submission, seed: int):
    """Seed the global torch and numpy generators in the jail, so that a grade can be reproduced
    (a learner's get_batch without `generator` draws from them)."""
    try:
        submission.module("torch").manual_seed(seed)
        submission.module("numpy").random.seed(seed)
    except LearnerError:
        pass            # nothing to seed: the draws stay random, and every bound below allows that


def jail_generator(submission, seed: int):
    """A seeded torch.Generator that lives in the jail (a generator cannot cross the wire as data;
    a handle to one can, and arrives at the learner's code as the generator itself)."""
    try:
        return submission.module("torch").Generator().manual_seed(seed)
    except LearnerError as exc:
        fail(msg("could not make a torch.Generator in your submission's process ({error}); does "
                 "your code replace parts of torch?", error=str(exc)), symptoms=["exception"])


@check(points=2, rule="data-windows", day=49, title="get_batch returns int64 x and y on `device`")
def test_get_batch_returns_int64(submission):
    # int64, not int32: F.cross_entropy rejects int32 targets ("expected target dtype to be Long").
    # The dtype is get_batch's output contract (rule data-windows); the shift itself may be right.
    seed_jail(submission, 149)
    tokens = distinct_tokens(120, seed=4)
    for label, data in [(msg("a numpy int64 array"), tokens),
                        (msg("a numpy int32 array"), tokens.astype(np.int32)),
                        (msg("an int64 tensor"), torch.from_numpy(tokens)),
                        (msg("an int32 tensor"), torch.from_numpy(tokens).int())]:
        x, y, what = call_get_batch(submission, data, 4, 8)
        for name, t in (("x", x), ("y", y)):
            if t.dtype != torch.int64:
                fail(msg("{what} with data given as {label} returned {name} as {dtype}; x and y "
                         "must be int64. F.cross_entropy rejects int32 targets (\"expected target "
                         "dtype to be Long\"), so training would crash at the loss. Convert the "
                         "windows with .astype(np.int64) or .long(), whatever dtype data has.",
                         what=what, label=label, name=name,
                         dtype=str(t.dtype).replace('torch.', '')),
                     got=str(t.dtype), data=str(label))
    expect_moved_to_device(submission, torch.from_numpy(tokens))


def expect_moved_to_device(submission, data):
    """x and y are on `device`. A tensor on device "meta" has a shape and no values, so no batch
    on "meta" can come back to the grader: values that do come back never reached that device.
    Only that is judged here (the wire cannot carry a meta tensor to look at it): a get_batch whose
    call fails on "meta" uses `device` for something, and is not failed for it."""
    what = msg("get_batch(data = a tensor of {n} tokens, batch_size={batch_size}, "
               "block_size={block_size})", n=len(data), batch_size=4, block_size=8)
    try:
        submission.data.get_batch(data, 4, 8, device="meta")
    except LearnerError:
        return
    fail(msg("{what} with device=\"meta\" returned tensors that hold values, but a tensor on "
             "device \"meta\" has none: x and y stayed where they were built, and device was "
             "ignored. On a GPU the model would then get CPU batches. Move them at the end: "
             "return x.to(device), y.to(device).", what=what),
         symptoms=["value-mismatch"])


@check(points=3, rule="data-windows", day=49, title="every row is a window of data, y shifted by one")
def test_get_batch_rows_are_shifted_windows(submission):
    seed_jail(submission, 49)
    tokens = distinct_tokens(300, seed=5)
    for data, batch_size, block_size, kwargs in [
        (tokens, 32, 16, {}),                                   # numpy array
        (torch.from_numpy(tokens), 32, 16, {"device": "cpu"}),  # tensor, device given
        (tokens[:50], 8, 1, {}),                                # block_size = 1
        (torch.from_numpy(tokens[:40]), 64, 30, {}),            # few starts, long windows
        (tokens[:60], 1, 19, {}),                               # one row
        (tokens.astype(np.int32), 7, 5, {}),                    # int32 array, odd sizes
        (torch.from_numpy(tokens).int(), 9, 2, {}),             # int32 tensor
        (tokens[:101], 33, 12, {"generator": jail_generator(submission, 7)}),
    ]:
        x, y, what = call_get_batch(submission, data, batch_size, block_size, **kwargs)
        window_starts(x, y, data, block_size, what, diagnose=True)


def draw_starts(submission, data, block_size: int, batch_size: int, calls: int, hint=WINDOW_HINT,
                **kwargs):
    counts = Counter()
    n_starts = len(data) - block_size
    for _ in range(calls):
        x, y, what = call_get_batch(submission, data, batch_size, block_size, hint=hint, **kwargs)
        starts = window_starts(x, y, data, block_size, what)
        # a uniform sampler gives all rows one start with probability n_starts^-(batch_size - 1)
        if n_starts > 1 and (batch_size - 1) * math.log(n_starts) > 20 and len(set(starts)) == 1:
            fail(msg("all {batch_size} rows of {what} start at the same position {start}: each "
                     "row is its own random window. Draw one start per row: torch.randint(len(data) "
                     "- block_size, (batch_size,)).", batch_size=batch_size, what=what,
                     start=starts[0]), symptoms=["value-mismatch"])
        counts.update(starts)
    return counts


def expect_every_start(counts: Counter, n_starts: int, block_size: int, draws: int):
    missing = [i for i in range(n_starts) if counts[i] == 0]
    if missing == [n_starts - 1]:
        fail(msg("with len(data) = {n} and block_size = {block_size} there are {n_starts} valid "
                 "starts, 0 .. {last}, but the last one, {last}, never came up in {draws} draws "
                 "(each should come up about {each} times). torch.randint(high, ...) already "
                 "excludes high, so torch.randint(len(data) - block_size, ...) yields every valid "
                 "start, the last included; subtracting one more drops the last window of the data "
                 "from training.", n=n_starts + block_size, block_size=block_size,
                 n_starts=n_starts, last=n_starts - 1, draws=draws, each=draws // n_starts),
             symptoms=["value-mismatch"], missing=missing)
    if missing:
        fail(msg("starts {missing} never came up in {draws} draws over the {n_starts} valid starts "
                 "0 .. {last} (each should come up about {each} times). Draw every row's start "
                 "independently and uniformly: torch.randint(len(data) - block_size, "
                 "(batch_size,)).", missing=show(missing), draws=draws, n_starts=n_starts,
                 last=n_starts - 1, each=draws // n_starts),
             symptoms=["value-mismatch"], missing=missing)


@check(points=3, rule="data-windows", day=49, title="every valid start is drawn, the last one too, uniformly",
       needs=("get-batch-rows-are-shifted-windows",))
def test_get_batch_draws_every_start_uniformly(submission):
    seed_jail(submission, 1049)
    # Exactly one window: len(data) = block_size + 1 is enough, and its only start is 0.
    data = distinct_tokens(9, seed=6)
    draw_starts(submission, data, 8, 8, 1, hint=msg(
        "With len(data) = block_size + 1 there is exactly one window, at start 0, and "
        "torch.randint(len(data) - block_size, ...) = torch.randint(1, ...) always picks it. "
        "torch.randint(0, ...) (an extra - 1) raises; torch.randint(2, ...) (an extra + 1) also "
        "picks start 1, whose y runs off the end of data."))
    # Three windows: all three must come up, the last included.
    data = torch.from_numpy(distinct_tokens(8, seed=7))
    expect_every_start(draw_starts(submission, data, 5, 64, 4), 3, 5, 256)
    # Twenty windows, 4000 draws: every start, and counts a uniform sampler could give.
    n_starts, block_size, draws = 20, 4, 4000
    counts = draw_starts(submission, distinct_tokens(n_starts + block_size, seed=8), block_size,
                         draws // 4, 4)
    expect_every_start(counts, n_starts, block_size, draws)
    expected = draws / n_starts
    chi2 = sum((counts[i] - expected) ** 2 / expected for i in range(n_starts))
    dof = n_starts - 1
    # P(chi-square with 19 degrees of freedom > 19 + 10 sqrt(38) = 80.6) = 1.4e-9 (regularised
    # upper incomplete gamma Q(19/2, 80.6/2)); 4000 draws over 20 starts are enough for the
    # chi-square approximation (200 expected per cell).
    bound = dof + 10 * math.sqrt(2 * dof)
    if chi2 > bound:
        fail(msg("the window starts are far from uniform: counts {counts} over {draws} draws, "
                 "about {expected:.0f} each expected (chi-square {chi2:.0f} with {dof} degrees of "
                 "freedom; a uniform sampler stays below {bound:.0f}). Every valid start must be "
                 "equally likely: draw each row's start independently with torch.randint(len(data) "
                 "- block_size, (batch_size,)).", counts=str([counts[i] for i in range(n_starts)]),
                 draws=draws, expected=expected, chi2=chi2, dof=dof, bound=bound),
             symptoms=["value-mismatch"], chi2=chi2, bound=bound)
    # A thousand windows, as in real data: a sampler confined to some of them (the first hundred,
    # say) must fail, from torch's global generator and from a seeded `generator` alike.
    n_starts, block_size, batch_size, calls = 1000, 3, 1000, 4
    data = distinct_tokens(n_starts + block_size, seed=10)
    for label, kwargs in ((msg("torch's global generator"), {}),
                          ("generator = torch.Generator().manual_seed(1049)",
                           {"generator": jail_generator(submission, 1049)})):
        counts = draw_starts(submission, data, block_size, batch_size, calls, **kwargs)
        expect_uniform_starts(counts, n_starts, label)


# False-reject probability of the many-starts test: by the Dvoretzky-Kiefer-Wolfowitz inequality
# with Massart's constant, the empirical CDF F_n of n independent draws from any distribution F
# satisfies P(max_i |F_n(i) - F(i)| > eps) <= 2 exp(-2 n eps^2). With eps = sqrt(ln(2 / 1e-7) /
# (2 n)) a uniform sampler is rejected with probability at most 1e-7 per run (eps = 0.046 for
# n = 4000 draws); the check makes two runs, and its chi-square (1.4e-9) and every-start tests
# (3 (2/3)^256 and 20 (19/20)^4000) add far less, so a correct get_batch fails it with
# probability below 3e-7. A sampler that reaches only the first 100 of 1000 starts is off by 0.9.
DKW_FALSE_REJECT = 1e-7


def expect_uniform_starts(counts: Counter, n_starts: int, label: str):
    n = sum(counts.values())
    eps = math.sqrt(math.log(2 / DKW_FALSE_REJECT) / (2 * n))
    seen, worst = 0, (0.0, 0, 0.0)
    for i in range(n_starts):
        seen += counts[i]
        gap = abs(seen / n - (i + 1) / n_starts)
        if gap > worst[0]:
            worst = (gap, i, seen / n)
    gap, at, share = worst
    if gap > eps:
        fail(msg("with {label}, get_batch's window starts are not uniform over the {n_starts} "
                 "valid starts 0 .. {last}: {share:.1%} of {n} draws were at most {at}, where a "
                 "uniform sampler gives {uniform:.1%} and stays within {eps:.1%} of that (but "
                 "once in ten million runs); the largest start drawn was {largest}. Every valid "
                 "start must be equally likely: draw each row's start with "
                 "torch.randint(len(data) - block_size, (batch_size,), generator=generator).",
                 label=label, n_starts=n_starts, last=n_starts - 1, share=share, n=n, at=at,
                 uniform=(at + 1) / n_starts, eps=eps, largest=max(counts)),
             symptoms=["value-mismatch"], max_deviation=gap, bound=eps)


@check(points=1, rule="data-windows", day=49,
       title="get_batch draws from `generator` alone: the same seed gives the same batches",
       needs=("get-batch-rows-are-shifted-windows",))
def test_get_batch_uses_the_generator(submission):
    seed_jail(submission, 249)       # only for a learner who ignores the generator
    for data in (distinct_tokens(200, seed=9), torch.from_numpy(distinct_tokens(77, seed=11))):
        expect_same_batch_for_the_same_seed(submission, data)
        expect_successive_batches(submission, data)
    expect_global_rng_untouched(submission, distinct_tokens(200, seed=12))


def expect_same_batch_for_the_same_seed(submission, data):
    batches = []
    for seed in (1234, 1234, 4321):
        x, y, what = call_get_batch(submission, data, 16, 8, generator=jail_generator(submission, seed))
        window_starts(x, y, data, 8, what)
        batches.append((x, y))
    (x1, y1), (x2, y2), (x3, _) = batches
    if not (torch.equal(x1, x2) and torch.equal(y1, y2)):
        fail(msg("two calls of get_batch, each with a fresh torch.Generator().manual_seed(1234), "
                 "gave different batches: the random starts do not come from `generator`. Pass it "
                 "on: torch.randint(len(data) - block_size, (batch_size,), generator=generator)."),
             symptoms=["value-mismatch"])
    if torch.equal(x1, x3):
        fail(msg("generators seeded 1234 and 4321 gave the same batch: the random starts do not "
                 "come from `generator` (is the global seed reset inside get_batch?). Pass it on: "
                 "torch.randint(..., generator=generator)."), symptoms=["value-mismatch"])


def batches_of(submission, data, seed: int, calls: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`calls` successive batches (x, y) drawn with one generator seeded `seed`."""
    generator = jail_generator(submission, seed)
    batches = []
    for _ in range(calls):
        x, y, what = call_get_batch(submission, data, 16, 8, generator=generator)
        window_starts(x, y, data, 8, what)
        batches.append((x, y))
    return batches


def expect_successive_batches(submission, data):
    # a generator advances with each draw: one generator gives a new batch on each call (16 random
    # starts repeating by chance: below 60^-16), and a fresh one of the same seed gives the same
    # sequence again
    first = batches_of(submission, data, 2024, 3)
    for n in range(1, len(first)):
        if torch.equal(first[n][0], first[n - 1][0]):
            fail(msg("calls {a} and {b} of get_batch with one torch.Generator().manual_seed(2024) "
                     "gave the same batch: the generator does not advance between calls, so "
                     "training would see one batch over and over (does get_batch reseed a "
                     "generator, or torch's global RNG, from the generator's seed?). Draw from the "
                     "generator itself: torch.randint(len(data) - block_size, (batch_size,), "
                     "generator=generator).", a=n, b=n + 1),
                 symptoms=["value-mismatch"], call=n + 1)
    again = batches_of(submission, data, 2024, 3)
    same = [torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True)]
    if not all(same):
        fail(msg("two runs of three get_batch calls, each run with a fresh "
                 "torch.Generator().manual_seed(2024), gave different batches: every random "
                 "number must come from `generator`, so that the same seed gives the same batches "
                 "in the same order. Pass it on: torch.randint(..., generator=generator)."),
             symptoms=["value-mismatch"])


GLOBAL_SEED = 4049


def expect_global_rng_untouched(submission, data):
    """get_batch with a generator leaves torch's global RNG as it found it: after seeding it in
    the jail and calling get_batch, the jail's next global draws are the ones this seed gives,
    computed here."""
    jail_torch = submission.module("torch")
    try:
        jail_torch.manual_seed(GLOBAL_SEED)
    except LearnerError as exc:
        fail(msg("could not seed torch in your submission's process ({error}); does your code "
                 "replace parts of torch?", error=str(exc)), symptoms=["exception"])
    call_get_batch(submission, data, 16, 8, generator=jail_generator(submission, 7))
    drawn = jail_torch.randint(1 << 30, (8,))
    expected = torch.randint(1 << 30, (8,), generator=torch.Generator().manual_seed(GLOBAL_SEED))
    if not (isinstance(drawn, torch.Tensor) and torch.equal(drawn, expected)):
        fail(msg("get_batch called with a generator changed torch's global RNG: after "
                 "torch.manual_seed({seed}) and one get_batch(..., generator=g), the global "
                 "draws were not those of seed {seed}. With a generator given, every random "
                 "number comes from it, and the caller's global RNG is left alone (no "
                 "torch.manual_seed inside get_batch): torch.randint(..., generator=generator).",
                 seed=GLOBAL_SEED), symptoms=["value-mismatch"])


@check(points=1, rule="api-contract", day=49, title="data too short for one window is a ValueError")
def test_get_batch_rejects_data_shorter_than_a_window(submission):
    for n_tokens, block_size, as_tensor in [(8, 8, False), (3, 8, False), (0, 4, False), (5, 5, True)]:
        data = torch.arange(n_tokens) if as_tensor else np.arange(n_tokens, dtype=np.int64)
        exc = expect_raises(lambda: submission.data.get_batch(data, 4, block_size), "ValueError",
                            msg("get_batch(data of {n} tokens, batch_size=4, block_size={block_size})",
                                n=n_tokens, block_size=block_size),
                            hint=msg("One window needs block_size + 1 tokens (block_size inputs and "
                                     "one more target), so len(data) < block_size + 1 leaves no "
                                     "valid start: check for it and raise ValueError naming the "
                                     "argument."))
        if "data" not in exc.learner_message and "block_size" not in exc.learner_message:
            fail(msg("the ValueError should name the argument that is wrong (data or block_size), "
                     "got: {message}", message=repr(exc.learner_message)))


# -- lm_loss (loss-flattening) ---------------------------------------------------------------------

LOSS_SHAPES = [(2, 5, 7), (1, 1, 3), (1, 6, 11), (4, 1, 5), (3, 4, 50), (2, 6, 6)]   # (B, T, V)


def call_lm_loss(submission, logits, targets, what):
    got = learner_call(lambda: submission.data.lm_loss(logits, targets), what, hint=FLATTEN_HINT,
                       symptoms=["shape-mismatch"])
    if not isinstance(got, torch.Tensor):
        fail(msg("{what} returned a {type}; return the loss as a 0-dim tensor (not .item()), so "
                 "that training can call loss.backward() on it.", what=what, type=type(got).__name__),
             symptoms=["shape-mismatch"])
    if isinstance(got, torch.Tensor) and got.dim() != 0:
        fail(msg("{what} returned shape {shape}; expected one number, a 0-dim tensor: the mean "
                 "cross-entropy over all B*T positions (reduction='mean', the default).",
                 what=what, shape=tuple(got.shape)),
             symptoms=["shape-mismatch"], got=list(got.shape))
    return expect_shape(got, (), what)


def shifted_loss(logits, targets, offset: int) -> float:
    """The mean cross-entropy of logits[:, t] against targets[:, t + offset], in float64."""
    T = logits.size(1)
    if offset >= 0:
        return float(ref.lm_loss(logits[:, :T - offset].double().contiguous(), targets[:, offset:]))
    return float(ref.lm_loss(logits[:, -offset:].double().contiguous(), targets[:, :T + offset]))


def shifted_again(got, logits, targets) -> bool:
    """Whether lm_loss shifts logits and targets once more (as a Hugging Face model does inside:
    logits[:, :-1] against targets[:, 1:]), though make_xy and get_batch already did."""
    if logits.size(1) < 2 or not torch.isfinite(got):
        return False
    return any(abs(float(got) - shifted_loss(logits, targets, offset)) <= 1e-4 * (1 + abs(float(got)))
               for offset in (1, -1))


def loss_case(B: int, T: int, V: int, scale: float, offset: float, seed: int) -> dict:
    """(B, T, V) logits of the drawn magnitude around `offset`, and targets in range."""
    logits = (random_tensor((B, T, V), dtype=torch.float64, seed=seed, scale=scale) + offset).float()
    targets = torch.randint(V, (B, T), generator=torch.Generator().manual_seed(seed + 1))
    return {"logits": logits, "targets": targets}


# B and T down to 1, odd and even V, logits of unit scale around 0 and around offsets of 500 and
# -300, where logsumexp(z) - z[target] cancels in float32.
LOSS_CASES = st.builds(loss_case, B=st.integers(1, 4), T=sizes(1, 9), V=st.integers(2, 60),
                       scale=magnitudes((1.0, 3.0)), offset=st.sampled_from([0.0, 500.0, -300.0]),
                       seed=seeds())
# Logits of large magnitude, up to 1e4: where log(softmax(z)) rounds a probability to 0.
LARGE_LOSS_CASES = st.builds(loss_case, B=st.integers(1, 4), T=sizes(1, 9), V=st.integers(2, 60),
                             scale=magnitudes((30.0, 500.0, 1e4)), offset=st.just(0.0), seed=seeds())


def expect_loss(submission, case, hint: str, nan_symptom: str = "value-mismatch"):
    """The learner's lm_loss on a case matches the reference, within the conditioned tolerance."""
    logits, targets = case["logits"], case["targets"]
    B, T, V = logits.shape
    what = msg("lm_loss(logits of shape {logits}, targets of shape {targets})", logits=(B, T, V),
               targets=(B, T))
    got = call_lm_loss(submission, logits, targets, what)
    expected = ref.lm_loss(logits.double(), targets)
    if B * T > 1 and float(expected) > 0 and abs(float(got) / float(expected) - B * T) < 1e-3 * B * T:
        hint = msg("Yours is B*T = {n} times the mean: the losses were summed. Average over "
                   "all B*T positions: reduction='mean', F.cross_entropy's default.", n=B * T)
    # logsumexp(z) - z[target], a correct way to write the loss, subtracts two numbers of the
    # logits' magnitude: it rounds by about eps * max|z| however small the loss, which input
    # conditioning alone does not see (around 500 the loss itself can be 1e-5)
    tol = (conditioned_tolerance(ref.lm_loss, [logits, targets], logits.dtype, reduction=B * T * V)
           + tolerance(logits.dtype) * float(logits.abs().max()))
    expect_close(got, expected, what, dtype=logits.dtype, tol=tol, hint=hint, nan_symptom=nan_symptom)


def first_loss_case() -> dict:
    return loss_case(2, 5, 7, scale=2.0, offset=0.0, seed=0)


def loss_shifts_again(submission) -> bool:
    case = first_loss_case()
    got = call_lm_loss(submission, case["logits"], case["targets"],
                       msg("lm_loss(logits of shape {logits}, targets of shape {targets})",
                           logits=(2, 5, 7), targets=(2, 5)))
    return shifted_again(got, case["logits"], case["targets"])


@check(points=2, rule="loss-flattening", day=49, title="lm_loss is cross-entropy over (B*T, V) vs (B*T,)")
def test_lm_loss_matches_flattened_cross_entropy(submission):
    if loss_shifts_again(submission):
        return          # flattened, but shifted once more: the target-shift check below judges it
    corners = [loss_case(B, T, V, scale=2.0, offset=0.0, seed=n) for n, (B, T, V) in enumerate(LOSS_SHAPES)]
    explore(LOSS_CASES, lambda case: expect_loss(submission, case, FLATTEN_HINT), what="lm_loss",
            corners=corners)


LOG_SPACE_HINT = msg("With logits this large, softmax rounds the probability of some target to 0 "
                     "and log(0) = -inf: compute the loss in log space, F.cross_entropy or "
                     "F.log_softmax, never log(softmax(logits)).")


@check(points=1, rule="numerical-stability", day=49, title="lm_loss stays exact for logits up to 1e4",
       needs=("lm-loss-matches-flattened-cross-entropy",))
def test_lm_loss_is_stable_for_large_logits(submission):
    if loss_shifts_again(submission):
        return          # the target-shift check judges a loss that shifts again
    case = first_loss_case()
    try:
        expect_loss(submission, case, FLATTEN_HINT)
    except CheckFailure:
        fail(msg("lm_loss is not yet the cross-entropy on ordinary logits (see the check "
                 "\"lm_loss is cross-entropy over (B*T, V) vs (B*T,)\"), so its numerics on large "
                 "logits cannot be judged: fix that first."), symptoms=["value-mismatch"])

    def stable(case):
        try:
            expect_loss(submission, case, LOG_SPACE_HINT, nan_symptom="softmax-overflow")
        except CheckFailure as failure:
            fail(failure.message, symptoms=failure.symptoms, **failure.evidence,
                 diagnosis=[{"rule": "numerical-stability", "day": 49, "mutant": None,
                             "message": msg("lm_loss loses its accuracy for large logits: compute "
                                            "it in log space")}])

    explore(LARGE_LOSS_CASES, stable, what="lm_loss")


@check(points=1, rule="loss-flattening", day=49, title="lm_loss averages over every position")
def test_lm_loss_is_a_mean(submission):
    B, T, V = 4, 8, 100
    logits = torch.zeros(B, T, V)         # every token equally likely: the loss is ln(V) everywhere
    targets = torch.randint(V, (B, T), generator=torch.Generator().manual_seed(7))
    what = msg("lm_loss(all-zero logits of shape {logits}, targets {targets})", logits=(B, T, V),
               targets=(B, T))
    got = float(call_lm_loss(submission, logits, targets, what))
    ln_v = math.log(V)
    if not abs(got - ln_v) <= 1e-4:
        ratio = got / ln_v
        why = None
        for factor, meaning in ((B * T, msg("B*T: the losses of all positions were summed instead "
                                            "of averaged. Use reduction='mean' (the default)")),
                                (T, msg("T: each sequence's losses were summed, then averaged over "
                                        "the batch. Average over all B*T positions")),
                                (B, msg("B: the losses were summed over the batch. Average over all "
                                        "B*T positions"))):
            if abs(ratio - factor) < 0.01 * factor:
                why = (factor, meaning)
                break
        values = dict(what=what, got=got, V=V, ln_v=ln_v, ratio=ratio)
        if why:
            message = msg("{what} returned {got:.4f}; with all-zero logits every token is equally "
                          "likely, so the mean cross-entropy is ln(V) = ln {V} = {ln_v:.4f}, the "
                          "first loss to expect before training. Yours is {ratio:.3g} x ln(V). That "
                          "is {factor} = {meaning}.", factor=why[0], meaning=why[1], **values)
        else:
            message = msg("{what} returned {got:.4f}; with all-zero logits every token is equally "
                          "likely, so the mean cross-entropy is ln(V) = ln {V} = {ln_v:.4f}, the "
                          "first loss to expect before training. Yours is {ratio:.3g} x ln(V).",
                          **values)
        fail(message, symptoms=["first-loss-off"], got=got, expected=ln_v)


@check(points=1, rule="target-shift", day=49, title="lm_loss scores logits[:, t] against targets[:, t]",
       needs=("lm-loss-matches-flattened-cross-entropy",))
def test_lm_loss_does_not_shift_again(submission):
    # make_xy and get_batch already shifted: targets[:, t] is the token after x[:, t], so the logits
    # of position t are scored against targets[:, t]. Logits that put all the weight on that
    # target at every position give a loss of (V - 1) e^-30 per position, about 0; a loss that
    # shifts once more scores them against the neighbouring targets and gets about 30.
    for seed, (B, T, V) in enumerate([(2, 5, 7), (3, 4, 50), (1, 1, 3), (2, 6, 6)]):
        targets = torch.randint(V, (B, T), generator=torch.Generator().manual_seed(300 + seed))
        logits = torch.zeros(B, T, V).scatter_(-1, targets.unsqueeze(-1), 30.0)
        what = msg("lm_loss(logits of shape {logits} that put all the weight on the target at "
                   "every position, targets of shape {targets})", logits=(B, T, V), targets=(B, T))
        got = call_lm_loss(submission, logits, targets, what)
        if float(got) <= 1e-4:
            continue
        if shifted_again(got, logits, targets):
            fail(msg("{what} returned {got:.3g}, the loss of logits[:, t] against targets[:, t + "
                     "1]: your lm_loss shifts the targets again, but make_xy and get_batch already "
                     "did (targets[:, t] is the token after x[:, t]), so each position is trained "
                     "to predict the token two ahead. Score logits[:, t] against targets[:, t]: "
                     "F.cross_entropy(logits.view(-1, V), targets.view(-1)), no slicing.",
                     what=what, got=float(got)),
                 symptoms=["value-mismatch"])
        fail(msg("{what} returned {got:.3g}; these logits put all the weight on targets[b, t] at "
                 "every position t, so the loss is about 0. lm_loss must score logits[:, t] against "
                 "targets[:, t] (they are already the next tokens): no shift inside the loss.",
                 what=what, got=float(got)), symptoms=["value-mismatch"], got=float(got))
