"""swiglu's torch mutants: the bundled SwiGLU (weights [in, out] as raw Parameters) with one mistake each."""
import torch
from torch.nn import functional as F

from layer_conformance.reference_impls.torch.swiglu import SwiGLU
from tests.mutants.catalogue import Mutant

M = "tests.mutants.torch_swiglu"


class SwiGLUGelu(SwiGLU):
    """GeGLU where SwiGLU is asked for: gelu gates the w1 branch instead of silu."""
    def forward(self, X):
        return (F.gelu(X @ self.w1) * (X @ self.w3)) @ self.w2


class SwiGLUGateOnUp(SwiGLU):
    """The gate and the up projection swapped: silu on x @ w3, x @ w1 linear."""
    def forward(self, X):
        return ((X @ self.w1) * F.silu(X @ self.w3)) @ self.w2


class SwiGLUNoDown(SwiGLU):
    """The down projection forgotten: returns the gated hidden activation [..., hidden], w2 registered but unused."""
    def forward(self, X):
        return F.silu(X @ self.w1) * (X @ self.w3)


class SwiGLUUpPlainTensor(SwiGLU):
    """w3 held as a plain tensor attribute: invisible to parameters(), the optimizer and state_dict."""
    def __init__(self, d, hidden, device=None, dtype=None):
        super().__init__(d, hidden, device=device, dtype=dtype)
        up = self.w3.detach().clone()
        del self.w3
        self.w3 = up


class SwiGLUMatmulInBfloat16(SwiGLU):
    """Casts to bfloat16 for the matmuls "for speed" and back: a float32 run gets bfloat16's 3 digits."""
    def forward(self, X):
        b = torch.bfloat16
        h = F.silu(X.to(b) @ self.w1.to(b)) * (X.to(b) @ self.w3.to(b))
        return (h @ self.w2.to(b)).to(X.dtype)


class SwiGLUDownTransposed(SwiGLU):
    """w2 held [d, hidden], as nn.Linear would, and used transposed: right outputs, but the slot's layout is not the
    contract's [hidden, d], so no state can be set into it (parameters names the shape and proposes |T)."""
    def __init__(self, d, hidden, device=None, dtype=None):
        super().__init__(d, hidden, device=device, dtype=dtype)
        self.w2 = torch.nn.Parameter(self.w2.detach().t().contiguous())

    def forward(self, X):
        return (self.gate(X @ self.w1) * (X @ self.w3)) @ self.w2.t()


MUTANTS = [
    Mutant("torch", "swiglu", f"{M}:SwiGLUGelu", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "swiglu", f"{M}:SwiGLUGateOnUp", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    # an output [..., hidden] cannot feed the Dense(d) composition puts after it, and compiled's backward through
    # the compiled program, with a cotangent of the contract's output shape [..., d], is refused by autograd
    Mutant("torch", "swiglu", f"{M}:SwiGLUNoDown", "values", "case 'random': output shape [16, 16], expected [16, 8]",
           also=("composition", "compiled"), blocked=("gradients",)),
    Mutant("torch", "swiglu", f"{M}:SwiGLUUpPlainTensor", "parameters", "untracked attribute 'w3'",
           blocked=("compiled", "composition", "devices", "export", "gradients", "serialization", "values")),
    Mutant("torch", "swiglu", f"{M}:SwiGLUDownTransposed", "parameters", "use --state-map w2=w2|T",
           blocked=("abstract", "aliasing", "batching", "compiled", "devices", "export", "gradients", "layout",
                    "serialization", "strict_loading", "values")),
    Mutant("torch", "swiglu", f"{M}:SwiGLUMatmulInBfloat16", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
]


# --- geglu -----------------------------------------------------------------------------------

class GeGLUTanh(SwiGLU):
    """gelu's tanh approximation (F.gelu(approximate="tanh"), GPT-2's) where the contract asks for the exact one."""
    def forward(self, X):
        return (F.gelu(X @ self.w1, approximate="tanh") * (X @ self.w3)) @ self.w2


class GeGLUSilu(SwiGLU):
    """SwiGLU where GeGLU is asked for: silu gates the w1 branch."""
    def forward(self, X):
        return (F.silu(X @ self.w1) * (X @ self.w3)) @ self.w2


MUTANTS += [
    Mutant("torch", "geglu", f"{M}:GeGLUTanh", "values", "mismatched elements", blocked=("gradients",)),
    Mutant("torch", "geglu", f"{M}:GeGLUSilu", "values", "case 'random': mismatched elements", blocked=("gradients",)),
]
