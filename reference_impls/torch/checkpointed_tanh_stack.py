import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def _step(h, w, b):
    return torch.tanh(h @ w + b)


class CheckpointedTanhStack(nn.Module):
    def __init__(self, d, depth=4, device=None, dtype=None):
        super().__init__()
        # factory keyword arguments and reset_parameters, as torch.nn's layers: it can be built on meta
        self.w = nn.Parameter(torch.empty(d, d, device=device, dtype=dtype))
        self.b = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.depth = depth
        self.reset_parameters()

    def reset_parameters(self):
        d = self.b.shape[0]
        with torch.no_grad():
            # linspace in float64, then rounded: the contract's init, bit for bit
            self.w.copy_(torch.linspace(-0.5, 0.5, d * d, dtype=torch.float64, device=self.w.device)
                         .reshape(d, d).float())
            self.b.zero_()

    def forward(self, h):
        for _ in range(self.depth):
            # weights go in as arguments, so the recomputation sees exactly what forward saw
            h = checkpoint(_step, h, self.w, self.b, use_reentrant=False)
        return h


IMPL = CheckpointedTanhStack
