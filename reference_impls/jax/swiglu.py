import jax
from flax import nnx


class SwiGLU(nnx.Module):
    gate = staticmethod(jax.nn.silu)  # the gate's activation (GeGLU: the exact gelu)

    def __init__(self, d, hidden, rngs: nnx.Rngs):
        # the weights held [in, out], as the contract lays them out: y = x @ w; a normal of std 1/sqrt(fan_in),
        # drawn from the params stream of the Rngs given
        def weight(fan_in, fan_out):
            return nnx.Param(nnx.initializers.normal(stddev=fan_in ** -0.5)(rngs.params(), (fan_in, fan_out)))
        self.w1 = weight(d, hidden)
        self.w3 = weight(d, hidden)
        self.w2 = weight(hidden, d)

    def __call__(self, X):
        # silu gates the w1 branch; the up branch x @ w3 is linear
        return (self.gate(X @ self.w1[...]) * (X @ self.w3[...])) @ self.w2[...]


IMPL = SwiGLU
