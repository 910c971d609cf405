"""The GPT's configuration, kept in a helper module of the learner's own."""
from dataclasses import dataclass


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int
    d_model: int
    n_layer: int
    n_head: int
    d_ff: int | None = None        # None means 4 * d_model
    bias: bool = False             # bias of every nn.Linear; LayerNorms always have weight and bias
    tie_weights: bool = True
