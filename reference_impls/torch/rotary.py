import torch
from torch import nn


def rotate_half(x):
    # the halves pair up (Llama, GPT-NeoX): feature i with feature i + head_dim/2, not 2i with 2i + 1
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Rotary(nn.Module):
    """X: [batch, heads, seq, head_dim], positions 0..seq-1 on the second to last axis."""
    rotate_half = staticmethod(rotate_half)

    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        self.head_dim = head_dim
        self.base = base

    def cos_sin(self, seq, device, dtype):
        # inv_freq and the angles in float32 at least, from the constructor's numbers: no floating state for a
        # cast to 16 bits to round (a position multiplies inv_freq's rounding)
        exponents = torch.arange(0, self.head_dim, 2, device=device, dtype=dtype) / self.head_dim
        inv_freq = 1.0 / self.base ** exponents
        angles = torch.arange(seq, device=device, dtype=dtype)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()

    def forward(self, X):
        wide = torch.float64 if X.dtype == torch.float64 else torch.float32
        cos, sin = self.cos_sin(X.shape[-2], X.device, wide)
        Xw = X.to(wide)
        return (Xw * cos + self.rotate_half(Xw) * sin).to(X.dtype)  # rounded once, to the input's dtype


IMPL = Rotary
