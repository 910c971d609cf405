"""Per-learner variants of quiz questions: parameters drawn from a seed derived from the learner
and the exercise, and keys computed by reference_model, never typed by hand.

Drawing the parameters needs no torch (`draw_params`: what a quiz's starter sheet shows, made in
the grading server's web process); computing a key imports torch and the reference model, in the
process that grades (`draw`)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable


def variant_seed(student: str, exercise: str, question: str) -> int:
    digest = hashlib.sha256(f"{exercise}\0{question}\0{student}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def mha_params_bias(rng: random.Random) -> dict:
    d_k = rng.choice([16, 32, 64, 80, 128])
    n_head = rng.choice([2, 4, 6, 8, 12, 16])
    return {"d_model": d_k * n_head, "n_head": n_head}


def mha_params_bias_key(params: dict) -> int:
    import torch

    import reference_model as ref

    with torch.device("meta"):  # counts shapes without allocating weights
        return ref.count_parameters(ref.MultiHeadAttention(params["d_model"], params["n_head"], bias=True))


def softmax_pair(rng: random.Random) -> dict:
    a = rng.randrange(-600, 600)
    return {"a": a, "b": a + rng.choice([-3, -2, -1, 1, 2, 3])}


def softmax_pair_key(params: dict) -> list[float]:
    import torch

    import reference_model as ref

    key = ref.stable_softmax(torch.tensor([float(params["a"]), float(params["b"])], dtype=torch.float64))
    return [round(float(x), 6) for x in key]


def toy_gpt_params(rng: random.Random) -> dict:
    vocab = rng.choice([50, 64, 100, 128, 256])
    d_model = rng.choice([16, 32, 48, 64])
    n_layer = rng.choice([1, 2, 3])
    return {"vocab_size": vocab, "d_model": d_model, "n_layer": n_layer}


def toy_gpt_params_key(params: dict) -> int:
    import torch

    import reference_model as ref

    config = ref.GPTConfig(
        vocab_size=params["vocab_size"],
        block_size=16,
        d_model=params["d_model"],
        n_layer=params["n_layer"],
        n_head=4,
        tie_weights=True,
    )
    with torch.device("meta"):
        return ref.count_parameters(ref.GPT(config))


# generator name (key.toml's `variant`) -> (its parameters from a seeded rng, its key from them)
GENERATORS: dict[str, tuple[Callable[[random.Random], dict], Callable[[dict], object]]] = {
    "mha_params_bias": (mha_params_bias, mha_params_bias_key),
    "softmax_pair": (softmax_pair, softmax_pair_key),
    "toy_gpt_params": (toy_gpt_params, toy_gpt_params_key),
}


def draw_params(generator: str, student: str, exercise: str, question: str) -> dict:
    """The parameters of one learner's variant of a question (no torch)."""
    params_of, _ = GENERATORS[generator]
    return params_of(random.Random(variant_seed(student, exercise, question)))


def draw(generator: str, student: str, exercise: str, question: str) -> tuple[dict, object]:
    """(parameters, key) of one learner's variant of a question."""
    params = draw_params(generator, student, exercise, question)
    return params, GENERATORS[generator][1](params)
