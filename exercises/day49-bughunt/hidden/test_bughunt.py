"""Hidden tests for day49-bughunt: each of the four bugs is judged by its own check, so a learner
who fixes three of them earns those three, and the report names the one left."""
import math

import torch

import reference_model as ref
from grader.testkit import AcceptedDiagnosis, RealQuestion, check_answer, symptom_letter
from grader.testkit import judge_bug as diagnosis_of_bug
from grader.testkit import (LEARNED_MARGIN, LearnerError, ProbeResult, check, construct, dtype_name,
                            expect_close, expect_dtype, expect_shape, expect_tuple, fail, is_close,
                            judge_probe, judge_training, markov_corpus, max_error, msg, randomize, reported_curve,
                            tolerance, training_probe, type_name)

V, BLOCK, D_MODEL, N_HEAD = 100, 16, 32, 4
D_K = D_MODEL // N_HEAD


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


FIRST_SHAPE = (2, N_HEAD, 6, D_K)
# More heads of the shapes the toy GPT's attention can meet (T up to block_size = 16): T = 1, odd
# and even T, one head and many, d_k = 4, 8 and 16 (d_model = h * d_k). A scale or a mask that
# only works for the shape of the first call, (2, 4, 6, 8), shows up here.
OTHER_SHAPES = [(1, 1, 1, D_K), (3, 2, 5, 16), (1, N_HEAD, BLOCK, D_K), (2, 8, 3, 4), (1, 2, 2, D_K)]


class Weights:
    """The attention weights the learner's attention(q, k, v) applies, measured on random q and k.

    Attention is linear in v: with v = unit vectors (d_k keys at a time, the others zero), row i
    of the output is row i of the weights. w[..., i, j] is what query i takes from key j."""

    def __init__(self, submission, shape, seed):
        B, h, T, d_k = shape
        self.shape, self.d_k = tuple(shape), d_k
        self.q, self.k = randn(*shape, seed=seed), randn(*shape, seed=seed + 1)
        self.what = msg("attention(q, k, v) on heads of shape {shape}", shape=self.shape)
        rows = []
        for first in range(0, T, d_k):                  # keys first .. first + d_k - 1
            v = torch.zeros(shape)
            for j in range(first, min(T, first + d_k)):
                v[..., j, j - first] = 1.0
            out = submission.bughunt.attention(self.q, self.k, v)
            out = expect_dtype(expect_shape(out, self.q.shape, self.what), self.q.dtype, self.what)
            rows.append(out.double()[..., :min(T, first + d_k) - first])
        self.w = torch.cat(rows, dim=-1)                # (B, h, T, T)
        self.scores = (self.q.double() @ self.k.double().transpose(-2, -1))   # q_i . k_j, unscaled
        finite = torch.isfinite(self.w).all(-1)
        self.nan_rows = (~finite).nonzero().tolist()    # [b, head, query row]
        # which keys each query sees: a blocked key weighs exactly 0 (exp of -inf, -1e9 or
        # finfo.min) or less than 1e-30 (exp(-100)), a seen one far more
        self.seen = (self.w.abs() > 1e-30) & finite[..., None]

    def scale(self) -> float | None:
        """The s in softmax(s q.k) over the seen keys, from the ratio of two weights of one row
        (the median over rows); None when no row sees two keys."""
        estimates = []
        for index in self.seen.sum(-1).ge(2).nonzero().tolist():
            keys = self.seen[tuple(index)].nonzero().flatten().tolist()
            w, s = self.w[tuple(index)], self.scores[tuple(index)]
            for j, l in zip(keys, keys[1:]):
                if abs(s[j] - s[l]) > 1e-3:
                    estimates.append(float(torch.log(w[j] / w[l]) / (s[j] - s[l])))
        return float(torch.tensor(estimates).median()) if estimates else None

    def is_softmax(self, scale: float) -> bool:
        """Whether every finite row is softmax(scale * q.k) over the keys it sees."""
        expected = torch.softmax((scale * self.scores).masked_fill(~self.seen, float("-inf")), dim=-1)
        rows = self.seen.any(-1)
        return is_close(self.w[rows], expected[rows], tolerance(torch.float32, self.shape[2]))

    def causal(self) -> bool:
        T = self.shape[2]
        return not self.nan_rows and bool((self.seen == torch.ones(T, T, dtype=torch.bool).tril()).all())

    def future(self) -> bool:
        """Whether some query takes something from a key after it."""
        T = self.shape[2]
        return bool((self.seen & torch.ones(T, T, dtype=torch.bool).triu(1)).any())


def right_scale(weights: Weights) -> bool:
    scale = weights.scale()
    return scale is not None and abs(scale * math.sqrt(weights.d_k) - 1) <= 0.02 \
        and weights.is_softmax(scale)


@check(points=3, rule="attention-scaling", day=43, title="(A) scores are scaled by 1/sqrt(d_k)")
def test_attention_scale(submission):
    # judged on the keys the learner's mask lets through, whichever they are: a mask that is still
    # wrong is (B)'s to report
    first = Weights(submission, FIRST_SHAPE, seed=1)
    scale = first.scale()
    if scale is None or not first.is_softmax(scale):
        fail(msg("attention(q, k, v) does not compute softmax(q k^T / sqrt(d_k)) v with a causal mask."),
             symptoms=["value-mismatch"])
    if not right_scale(first):
        fail(msg("your attention scores are scaled by 1/{inverse:.3g}; expected 1/sqrt(d_k) = "
                 "1/{sqrt_d_k:.3g}. Dividing by more than sqrt(d_k) makes the scores too small and "
                 "the attention too flat (every token gets about the same weight); not dividing "
                 "makes softmax saturate.", inverse=1 / scale, sqrt_d_k=math.sqrt(D_K)),
             symptoms=["value-mismatch"], scale=scale)
    for n, shape in enumerate(OTHER_SHAPES):
        weights = Weights(submission, shape, seed=10 * (n + 1))
        scale = weights.scale()
        if scale is not None and not right_scale(weights):
            d_k = shape[-1]
            fail(msg("on heads of shape {shape} (d_k = {d_k}) your attention scores are scaled "
                     "by 1/{inverse:.3g}; expected 1/sqrt(d_k) = 1/{sqrt_d_k:.3g}. Take d_k "
                     "from the input, q.size(-1), not from a fixed configuration.",
                     shape=shape, d_k=d_k, inverse=1 / scale, sqrt_d_k=math.sqrt(d_k)),
                 symptoms=["value-mismatch"], scale=scale, shape=list(shape))


@check(points=2, rule="causal-mask", day=44, title="(B) the causal mask blocks only the future")
def test_causal_mask(submission):
    # judged on which keys each query sees, whatever the scale: a wrong scale is (A)'s to report
    first = Weights(submission, FIRST_SHAPE, seed=1)
    if first.causal():
        for n, shape in enumerate(OTHER_SHAPES):
            if not Weights(submission, shape, seed=10 * (n + 1)).causal():
                T = shape[2]
                fail(msg("on heads of shape {shape} (T = {T}) attention(q, k, v) does not compute "
                         "causal attention, though it does for shape (2, 4, 6, 8): build the mask from "
                         "the input's T = q.size(-2), torch.triu(torch.ones(T, T, dtype=torch.bool), "
                         "diagonal=1), for every T from 1 to block_size.", shape=shape, T=T),
                     symptoms=["value-mismatch"], shape=list(shape))
        return
    if first.nan_rows:
        b, head, row = first.nan_rows[0]
        fail(msg("NaN on the first forward pass at query row {row} (head {head}): "
                 "torch.triu(..., diagonal=0) blocks each token's own position too, so row 0 has "
                 "every key blocked and softmax of all -inf is 0/0 = NaN. Block only keys j > i: "
                 "diagonal=1.", row=row, head=head), symptoms=["nan-forward"], row=row, head=head)
    if first.future():
        fail(msg("attention lets each token see the tokens after it: the future leaks into the "
                 "past. Block key j > i with torch.triu(..., diagonal=1)."), symptoms=["future-leak"])
    fail(msg("attention(q, k, v) does not apply the causal mask softmax(... "
             "masked_fill(triu(diagonal=1), -inf))."),
         symptoms=["value-mismatch"])


def correct_attention(q, k, v):
    """Causal attention as SPEC defines it, in float64: the reference's."""
    return ref.scaled_dot_product_attention(q.double(), k.double(), v.double(), causal=True)


HALF_PRECISION_HINT = msg("A masking constant must fit the scores' dtype: float16 holds magnitudes up "
                          "to 65504 only, so -1e9 or torch.finfo(torch.float32).min overflow it. "
                          "Fill with float('-inf'), or with torch.finfo(scores.dtype).min, which "
                          "fits every dtype.")


@check(points=1, rule="numerical-stability", day=45, title="(B) attention runs in float16 and bfloat16",
       needs=("attention-scale", "causal-mask"))
def test_attention_in_half_precision(submission):
    # Builds on (A) and (B): half precision is judged once the float32 attention is right, against
    # correct causal attention in float64 on the same rounded inputs.
    first = Weights(submission, FIRST_SHAPE, seed=1)
    if not (right_scale(first) and first.causal()):
        fail(msg("attention(q, k, v) is not yet correct causal attention in float32, so its float16 "
                 "and bfloat16 results cannot be judged: fix (A) and (B) first."),
             symptoms=["value-mismatch"])
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (randn(2, N_HEAD, 6, D_K, seed=s).to(dtype) for s in (1, 2, 3))
        what = msg("attention(q, k, v) on {dtype} heads of shape {shape}", dtype=dtype_name(dtype),
                   shape=tuple(q.shape))
        try:
            out = submission.bughunt.attention(q, k, v)
        except LearnerError as exc:
            if exc.is_a("NotImplementedError"):
                raise
            overflow = "overflow" in exc.learner_message
            fail(msg("{what} raised {type}: {message}. It runs in float32, so the {dtype} "
                     "computation itself fails. {hint}", what=what, type=exc.type_name,
                     message=exc.learner_message, dtype=dtype_name(dtype), hint=HALF_PRECISION_HINT),
                 symptoms=["fp16-overflow" if overflow else "exception"])
        out = expect_dtype(expect_shape(out, q.shape, what), dtype, what)
        expected = correct_attention(q, k, v)
        if not torch.isfinite(out).all():
            fail(msg("{what} has NaN or inf where correct attention is finite: something overflows "
                     "in {dtype}. {hint}", what=what, dtype=dtype_name(dtype),
                     hint=HALF_PRECISION_HINT),
                 symptoms=["fp16-overflow"],
                 diagnosis=[{"rule": "numerical-stability", "day": 45, "mutant": None,
                             "message": msg("(B) attention overflows {dtype}",
                                            dtype=dtype_name(dtype))}])
        tol = tolerance(dtype, D_K * q.size(-2))
        err = max_error(out, expected)
        if err > tol:
            fail(msg("{what} differs from correct attention by up to {err:.3g} (allowed {tol:.1g} "
                     "for {dtype}), though it is right in float32: compute in the input's dtype, "
                     "without constants that {dtype} cannot hold.", what=what, err=err, tol=tol,
                     dtype=dtype_name(dtype)),
                 symptoms=["value-mismatch"], max_error=err, tolerance=tol)


@check(points=3, rule="pre-ln-residual", day=46, title="(C) the Block is Pre-LN",
       needs=("attention-scale", "causal-mask"))
def test_block_is_pre_ln(submission):
    # The block's wiring, judged with the learner's own ln_1, attn, ln_2 and mlp: an attention
    # still wrong in (A) or (B) is theirs to report, not this check's.
    torch.manual_seed(46)
    reference = ref.Block(ref.GPTConfig(V, BLOCK, D_MODEL, 1, N_HEAD))
    with torch.no_grad():                    # non-trivial LayerNorm gains, so Post-LN shows
        for name, p in reference.named_parameters():
            if name.startswith("ln_"):
                p.copy_(randn(*p.shape, seed=len(name)) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
    block = construct(submission.bughunt.Block, submission.bughunt.GPTConfig())
    submission.load(block, reference.state_dict())
    x = randn(2, 7, D_MODEL, seed=4)
    out = expect_dtype(expect_shape(block(x), x.shape, "Block(x)"), x.dtype, "Block(x)")

    def sub(name, h):
        return expect_shape(getattr(block, name)(h), x.shape, f"Block.{name}")

    h = x + sub("attn", sub("ln_1", x))
    pre_ln = h + sub("mlp", sub("ln_2", h))
    tol = tolerance(torch.float32, D_MODEL * 4)
    finite = torch.isfinite(pre_ln).all(-1)  # rows an unfixed (B) turns to NaN say nothing about (C)
    if torch.allclose(out[finite].double(), pre_ln[finite].double(), rtol=tol, atol=tol):
        return
    fail(msg("Block(x) is not x = x + attn(ln_1(x)) followed by x = x + mlp(ln_2(x)) (compared "
             "with your own ln_1, attn, ln_2 and mlp). The curriculum's GPT is Pre-LN: normalise "
             "only each sublayer's input and add its output to the un-normalised x, which keeps "
             "the residual path an identity and lets deep stacks train."),
         symptoms=["value-mismatch"])


@check(points=3, rule="target-shift", day=49, title="(D) the target is the next token")
def test_make_xy_shifts_targets(submission):
    # train() hands make_xy tensor slices of the data (get_batch), so chunks are int64 tensors;
    # the seed's chunk first, then odd and even lengths down to L = 1, and the seed's
    # chunk = tokens[i : i + L + 1] of a Python list of tokens, which make_xy turns into tensors
    for chunk in (torch.tensor([502, 1204, 33, 991, 88, 7, 64]), torch.arange(20, 0, -1),
                  torch.tensor([42, 17]), torch.randperm(BLOCK + 1, generator=torch.Generator().manual_seed(49)),
                  [5, 81, 23, 64, 9]):
        what = f"make_xy(chunk = {torch.as_tensor(chunk).tolist()})"    # code: the same in every language
        x, y = expect_tuple(submission.bughunt.make_xy(chunk), 2, what)
        ref_x, ref_y = ref.make_xy(chunk)
        chunk = torch.as_tensor(chunk)
        if (isinstance(y, torch.Tensor) and len(chunk) > 3 and y.shape == chunk[2:].shape
                and torch.equal(y.long(), chunk[2:])):
            fail(msg("{what} returns y = chunk[2:]: the targets are shifted twice, so the model "
                     "learns the token two ahead. The target of x[t] is the NEXT token: x = "
                     "chunk[:-1], y = chunk[1:].", what=what), symptoms=["value-mismatch"],
                 diagnosis=[{"rule": "target-shift", "day": 49, "mutant": None,
                             "message": msg("(D) y = chunk[2:]: targets shifted twice")}])
        x = expect_shape(x, ref_x.shape, msg("{what}[0] (x)", what=what))
        y = expect_shape(y, ref_y.shape, msg("{what}[1] (y)", what=what))
        if torch.equal(y.long(), x.long()):
            fail(msg("make_xy returns y equal to x: the model is asked to predict the token it already "
                     "sees, so the loss collapses toward 0 while it learns nothing. The target of x[t] "
                     "is the NEXT token: x = chunk[:-1], y = chunk[1:]."), symptoms=["loss-collapse"])
        if not (torch.equal(x.long(), ref_x) and torch.equal(y.long(), ref_y)):
            fail(msg("{what} should return x = chunk[:-1] = {x} and y = chunk[1:] = {y}.", what=what,
                     x=ref_x.tolist(), y=ref_y.tolist()), symptoms=["value-mismatch"])


def expect_windows(submission, data: torch.Tensor, batch_size: int, block_size: int):
    """get_batch's rows are windows of `data` of block_size tokens, y the next token of each x."""
    what = msg("get_batch(data = a tensor of {n} tokens, batch_size={batch_size}, "
               "block_size={block_size})", n=len(data), batch_size=batch_size, block_size=block_size)
    x, y = expect_tuple(submission.bughunt.get_batch(data, batch_size, block_size), 2, what)
    x = expect_shape(x, (batch_size, block_size), msg("{what}[0] (x)", what=what))
    y = expect_shape(y, (batch_size, block_size), msg("{what}[1] (y)", what=what))
    tokens = data.tolist()
    position = {token: i for i, token in enumerate(tokens)}          # data: distinct tokens
    for r, (row_x, row_y) in enumerate(zip(x.long().tolist(), y.long().tolist())):
        i = position.get(row_x[0], -1)
        if row_x != tokens[i:i + block_size] or row_y != tokens[i + 1:i + 1 + block_size]:
            fail(msg("row {r} of {what} is x = {x}, y = {y}: each row must be a window of data, "
                     "x = data[i : i + block_size] and y = data[i + 1 : i + 1 + block_size], so "
                     "get_batch hands make_xy the block_size + 1 tokens data[i : i + block_size + 1].",
                     r=r, what=what, x=row_x, y=row_y),
                 symptoms=["value-mismatch"], row=r)


def expect_default_run(submission, steps: int = 2):
    """train() with every argument but `steps` left out is SPEC's run: the toy GPTConfig() on
    random tokens, batch_size=32, lr=3e-3, seed=0 (two runs with one seed give one curve)."""
    what = f"train(steps={steps})"    # code: the same in every language
    losses = submission.bughunt.train(steps=steps)
    if not (isinstance(losses, list) and len(losses) == steps
            and all(isinstance(x, (int, float)) and math.isfinite(x) for x in losses)):
        fail(msg("{what} returned {got}; expected the list of its {steps} losses, each a finite "
                 "number. With data=None it trains on random tokens and with config=None on the "
                 "toy GPTConfig().", what=what, got=f"{losses!r:.80}", steps=steps),
             symptoms=["value-mismatch"])
    spelled_out = submission.bughunt.train(data=None, config=None, steps=steps, batch_size=32, lr=3e-3,
                                           seed=0)
    if not (isinstance(spelled_out, list) and len(spelled_out) == steps
            and all(isinstance(x, (int, float)) and abs(x - y) <= 1e-4 for x, y in zip(spelled_out, losses))):
        fail(msg("{what} reported the losses {losses}, but train(data=None, config=None, "
                 "steps={steps}, batch_size=32, lr=3e-3, seed=0) reported {spelled_out}: the "
                 "defaults are batch_size=32, lr=3e-3 and seed=0, and the seed fixes the model's "
                 "initial weights and the random tokens (torch.manual_seed(seed) first).",
                 what=what, losses=f"{losses!r:.80}", steps=steps,
                 spelled_out=f"{spelled_out!r:.80}"),
             symptoms=["value-mismatch"])


TOY = dict(vocab_size=V, block_size=BLOCK, d_model=D_MODEL, n_layer=2, n_head=N_HEAD)
TOY_REDUCTION = TOY["n_layer"] * 5 * D_MODEL + D_MODEL    # terms summed on the way to a logit



def expect_toy_ledger(submission, model):
    """GPT(GPTConfig()) has the toy GPT's parameters, by name and shape, with lm_head tied to wte."""
    reference = ref.GPT(ref.GPTConfig(**TOY))
    expected = {n: list(p.shape) for n, p in reference.named_parameters(remove_duplicate=False)}
    rows = [r for r in submission.parameters(model) if isinstance(r, dict) and "name" in r]
    got = {r["name"]: r.get("shape") for r in rows}
    if got != expected:
        wrong = sorted(n for n in set(got) | set(expected) if got.get(n) != expected.get(n))
        fail(msg("GPT(GPTConfig()) does not have the parameters of the seed's toy GPT ({config}): "
                 "{names} differ. Keep GPTConfig's defaults and the model's layers as they are.",
                 config=", ".join(f"{k}={v}" for k, v in TOY.items()), names=", ".join(wrong[:6])),
             symptoms=["shape-mismatch"], differ=wrong[:20])
    objects = {r["name"]: r.get("object") for r in rows}
    if objects["lm_head.weight"] != objects["wte.weight"]:
        fail(msg("in GPT(GPTConfig()), lm_head.weight and wte.weight are two Parameters; the bug "
                 "hunt's GPT ties them: self.lm_head.weight = self.wte.weight."),
             symptoms=["value-mismatch"])


def expect_small_init(submission, model):
    """The fresh GPT's Linear and Embedding weights are N(0, 0.02), as the listing initialises them."""
    for name, w in submission.state_dict(model).items():
        if isinstance(w, torch.Tensor) and w.dim() == 2 and w.numel():
            mean, std = w.double().mean().item(), w.double().std().item()
            if abs(mean) > 0.005 or not 0.015 < std < 0.025:
                fail(msg("a new GPT(GPTConfig()) has {name} with mean {mean:.3g} and standard "
                         "deviation {std:.3g}; the bug hunt's GPT initialises every Linear and "
                         "Embedding weight N(0, 0.02), which is why its first loss is about ln(V).",
                         name=name, mean=mean, std=std),
                     symptoms=["value-mismatch"], mean=mean, std=std)


@check(points=1, rule="api-contract", day=49, title="the fixed GPT is the seed's toy GPT",
       needs=("attention-scale", "causal-mask", "block-is-pre-ln"))
def test_gpt_matches_reference(submission):
    model = construct(submission.bughunt.GPT, submission.bughunt.GPTConfig())
    expect_toy_ledger(submission, model)
    expect_small_init(submission, model)
    reference = randomize(ref.GPT(ref.GPTConfig(**TOY)), seed=48)
    submission.load(model, reference.state_dict())
    g = torch.Generator().manual_seed(47)
    idx, targets = (torch.randint(V, (2, BLOCK), generator=g) for _ in range(2))
    what = msg("GPT(GPTConfig()) holding the grader's weights, on idx of shape {shape}",
               shape=tuple(idx.shape))
    logits, loss = expect_tuple(model(idx, targets), 2, what)
    ref_logits, ref_loss = reference.double()(idx, targets)
    hint = msg("logits = lm_head(ln_f(blocks(wte(idx) + wpe(arange(T))))), and the loss the mean "
               "cross-entropy of the logits against targets.")
    expect_close(logits, ref_logits, msg("the logits of {what}", what=what), dtype=torch.float32,
                 reduction=TOY_REDUCTION, hint=hint)
    expect_close(loss, ref_loss, msg("the loss of {what}", what=what), dtype=torch.float32,
                 reduction=TOY_REDUCTION, hint=hint)


@check(points=3, rule="target-shift", day=49, title="the fixed model trains honestly",
       needs=("attention-scale", "causal-mask", "block-is-pre-ln", "make-xy-shifts-targets"))
def test_training_on_a_markov_corpus(submission):
    data, floor = markov_corpus(V, 4, 20_000, seed=49)
    losses = submission.bughunt.train(data=data, config=submission.bughunt.GPTConfig(), steps=120,
                                      batch_size=16, lr=1e-2, seed=0)
    if not isinstance(losses, list) or not losses:
        fail(msg("train(...) should return the list of per-step losses, got {type}",
                 type=type_name(losses)))
    # what train() returns can fail this check, never pass it alone: the grader then trains the
    # fixed GPT itself and judges it from the losses it computes (testkit.training_probe).
    # At lr 1e-2 a correct run ends near 1.8 nats, one whose targets are visible far below ln 4.
    reported = ProbeResult(reported_curve(losses, 120), V, floor)
    judge_training(reported, msg("your model with your train()"))
    if reported.tail_mean(10) > reported.ln_v - LEARNED_MARGIN:
        fail(msg("the losses your train() reports end at {loss:.3f}, no better than the untrained "
                 "ln(V) = {ln_v:.3f}: its loop does not train the model. Each step needs "
                 "optimizer.zero_grad(), loss.backward() and optimizer.step().",
                 loss=reported.tail_mean(10), ln_v=reported.ln_v),
             symptoms=["value-mismatch"])
    # the batches train() draws, then train() as SPEC calls it (the arguments left out)
    tokens = torch.randperm(300, generator=torch.Generator().manual_seed(50))
    for batch_size, block_size in ((8, BLOCK), (3, 1), (5, 7)):
        expect_windows(submission, tokens, batch_size, block_size)
    expect_default_run(submission)
    torch.manual_seed(49)
    reference = ref.GPT(ref.GPTConfig(V, BLOCK, D_MODEL, 2, N_HEAD))    # N(0, 0.02), tied
    model = construct(submission.bughunt.GPT, submission.bughunt.GPTConfig())
    submission.load(model, reference.state_dict())
    what = msg("your fixed GPT")
    judge_probe(training_probe(submission, model, reference, vocab_size=V, block_size=BLOCK, steps=120,
                               batch_size=16, lr=3e-3, seed=49, what=what), what)


# -- diagnosis.toml -------------------------------------------------------------------------------

BUGS = {  # bug -> what its diagnosis accepts (SPEC: B is day 44 or 45, numerical-stability also)
    "A": AcceptedDiagnosis(frozenset({"attention-scaling"}), frozenset({43}), msg("what the scores are divided by")),
    "B": AcceptedDiagnosis(frozenset({"causal-mask", "numerical-stability"}), frozenset({44, 45}),
                           msg("which positions the mask blocks")),
    "C": AcceptedDiagnosis(frozenset({"pre-ln-residual"}), frozenset({46}),
                           msg("where the LayerNorm sits relative to the residual")),
    "D": AcceptedDiagnosis(frozenset({"target-shift"}), frozenset({49}), msg("what y is relative to x")),
}


def diagnosis(submission) -> dict:
    """The parsed diagnosis.toml; a malformed one fails (with its line and column) only the
    checks that read it."""
    return submission.toml_file("diagnosis.toml")


def judge_bug(submission, bug):
    problem = diagnosis_of_bug(diagnosis(submission), bug, BUGS[bug])   # grader.catalog.diagnosis_sheet: how it is read
    if problem is not None:
        fail(problem)


@check(points=1, rule="attention-scaling", day=43, title="diagnosis of bug (A)")
def test_diagnosis_bug_a(submission):
    judge_bug(submission, "A")


@check(points=1, rule="causal-mask", day=44, title="diagnosis of bug (B)")
def test_diagnosis_bug_b(submission):
    judge_bug(submission, "B")


@check(points=1, rule="pre-ln-residual", day=46, title="diagnosis of bug (C)")
def test_diagnosis_bug_c(submission):
    judge_bug(submission, "C")


@check(points=1, rule="target-shift", day=49, title="diagnosis of bug (D)")
def test_diagnosis_bug_d(submission):
    judge_bug(submission, "D")


@check(points=1, rule="quiz", day=49, title="which bug causes which symptom")
def test_diagnosis_symptoms(submission):
    symptoms = diagnosis(submission).get("symptoms", {})
    nan, collapse = (symptom_letter(symptoms.get(k)) for k in ("nan_first_forward", "loss_collapse"))
    if nan != "B":
        fail(msg("symptoms.nan_first_forward = {answer}: which bug leaves a query with no visible "
                 "key, so that softmax of all -inf is NaN on the very first forward pass?",
                 answer=repr(nan)))
    if collapse != "D":
        fail(msg("symptoms.loss_collapse = {answer}: which bug lets the model see the very "
                 "token it must predict?", answer=repr(collapse)))


@check(points=1, rule="quiz", day=49, title="the first loss after the fix")
def test_diagnosis_first_loss(submission):
    raw = diagnosis(submission).get("symptoms", {}).get("first_loss")
    result = check_answer(RealQuestion(id="first_loss", answer=math.log(V), tol=5e-3), raw)
    if not result.passed:
        fail(msg("symptoms.first_loss: {feedback} Hint: with small random weights every one of "
                 "the V = 100 tokens is about equally likely.", feedback=result.message))
