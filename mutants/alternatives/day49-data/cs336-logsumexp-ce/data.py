"""Correct, as CS336 students write cross-entropy by hand: logsumexp minus the target's logit,
averaged over batch and time; get_batch with torch.randint on a torch generator."""
import numpy as np
import torch


def make_xy(chunk):
    tokens = torch.tensor(np.asarray(chunk), dtype=torch.int64)
    return tokens[:-1].clone(), tokens[1:].clone()


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    dataset = torch.as_tensor(np.asarray(data)).to(torch.int64)
    if dataset.shape[0] < block_size + 1:
        raise ValueError("dataset too short for one window")
    starting_idxs = torch.randint(dataset.shape[0] - block_size, (batch_size,), generator=generator)
    x = torch.stack([dataset[i:i + block_size] for i in starting_idxs])
    y = torch.stack([dataset[i + 1:i + block_size + 1] for i in starting_idxs])
    return x.to(device), y.to(device)


def lm_loss(logits, targets):
    # -log softmax(logits)[target] = logsumexp(logits) - logits[target]
    target_logits = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return (torch.logsumexp(logits, dim=-1) - target_logits).mean()
