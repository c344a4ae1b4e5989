import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def _step(h, w, b):
    return torch.tanh(h @ w + b)


class CheckpointedTanhStack(nn.Module):
    def __init__(self, d, depth=4):
        super().__init__()
        # linspace in float64, then rounded: the contract's init, bit for bit
        self.w = nn.Parameter(torch.linspace(-0.5, 0.5, d * d, dtype=torch.float64).reshape(d, d).float())
        self.b = nn.Parameter(torch.zeros(d))
        self.depth = depth

    def forward(self, h):
        for _ in range(self.depth):
            # weights go in as arguments, so the recomputation sees exactly what forward saw
            h = checkpoint(_step, h, self.w, self.b, use_reentrant=False)
        return h


IMPL = CheckpointedTanhStack
