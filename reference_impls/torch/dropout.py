import torch
from torch import nn


class Dropout(nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, X):
        # self.training is set by .train()/.eval(), which a container passes to its children
        if not self.training or self.p == 0:
            return X
        keep = (torch.rand_like(X) >= self.p).to(X.dtype)
        return X * keep / (1.0 - self.p)


IMPL = Dropout
