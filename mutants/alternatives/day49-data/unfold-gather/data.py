import torch
import torch.nn.functional as F


def make_xy(chunk):
    chunk = torch.as_tensor(chunk).long()
    return chunk[:-1], chunk[1:]


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = torch.as_tensor(data).long()
    if len(data) < block_size + 1:
        raise ValueError(f"len(data)={len(data)} < block_size + 1 = {block_size + 1}")
    windows = data.unfold(0, block_size + 1, 1)          # (len - block_size, block_size + 1)
    ix = torch.randint(windows.size(0), (batch_size,), generator=generator)
    batch = windows[ix]
    return batch[:, :-1].to(device), batch[:, 1:].to(device)


def lm_loss(logits, targets):
    logp = F.log_softmax(logits.float(), dim=-1)
    return -logp.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1).mean()
