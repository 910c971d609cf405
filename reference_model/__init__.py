"""The trusted reference GPT: the public API of SPEC.md that learners implement, nothing else."""
from reference_model.attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    stable_softmax,
)
from reference_model.data import get_batch, lm_loss, make_xy
from reference_model.gpt import GPT, MLP, Block, GPTConfig, count_parameters
from reference_model.norms import LayerNorm, RMSNorm
from reference_model.positions import apply_rope, sinusoidal_positions

__all__ = [
    "GPT", "MLP", "Block", "GPTConfig", "LayerNorm", "MultiHeadAttention", "RMSNorm",
    "apply_rope", "count_parameters", "get_batch", "lm_loss", "make_xy", "merge_heads",
    "scaled_dot_product_attention", "sinusoidal_positions", "split_heads", "stable_softmax",
]
