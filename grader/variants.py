"""Per-learner variants of quiz questions: parameters drawn from a seed derived from the learner
and the exercise, and keys computed by reference_model, never typed by hand."""

from __future__ import annotations

import hashlib
import random

import torch

import reference_model as ref


def variant_seed(student: str, exercise: str, question: str) -> int:
    digest = hashlib.sha256(f"{exercise}\0{question}\0{student}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def mha_params_bias(rng: random.Random) -> tuple[dict, int]:
    d_k = rng.choice([16, 32, 64, 80, 128])
    n_head = rng.choice([2, 4, 6, 8, 12, 16])
    d_model = d_k * n_head
    with torch.device("meta"):  # counts shapes without allocating weights
        key = ref.count_parameters(ref.MultiHeadAttention(d_model, n_head, bias=True))
    return {"d_model": d_model, "n_head": n_head}, key


def softmax_pair(rng: random.Random) -> tuple[dict, list[float]]:
    a = rng.randrange(-600, 600)
    b = a + rng.choice([-3, -2, -1, 1, 2, 3])
    key = ref.stable_softmax(torch.tensor([float(a), float(b)], dtype=torch.float64))
    return {"a": a, "b": b}, [round(float(x), 6) for x in key]


def toy_gpt_params(rng: random.Random) -> tuple[dict, int]:
    vocab = rng.choice([50, 64, 100, 128, 256])
    d_model = rng.choice([16, 32, 48, 64])
    n_layer = rng.choice([1, 2, 3])
    config = ref.GPTConfig(
        vocab_size=vocab, block_size=16, d_model=d_model, n_layer=n_layer, n_head=4, tie_weights=True
    )
    with torch.device("meta"):
        key = ref.count_parameters(ref.GPT(config))
    return {"vocab_size": vocab, "d_model": d_model, "n_layer": n_layer}, key


GENERATORS = {
    "mha_params_bias": mha_params_bias,
    "softmax_pair": softmax_pair,
    "toy_gpt_params": toy_gpt_params,
}


def draw(generator: str, student: str, exercise: str, question: str) -> tuple[dict, object]:
    """(parameters, key) of one learner's variant of a question."""
    return GENERATORS[generator](random.Random(variant_seed(student, exercise, question)))
