import jax
import jax.numpy as jnp
from flax import nnx


class Dropout(nnx.Module):
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p = p
        # NNX's mode flag: Module.train()/eval() and nnx.view(..., deterministic=) set it on
        # every nested module, so a switch on an enclosing Sequential reaches this layer
        self.deterministic = False
        self.rngs = rngs.dropout.fork()  # an RNG stream in the module's state: a new key per call

    def set_view(self, *, deterministic: bool | None = None):
        """Called by nnx.view(model, deterministic=...)."""
        if deterministic is not None:
            self.deterministic = deterministic

    def __call__(self, X):
        if self.deterministic or self.p == 0:
            return X
        keep = jax.random.bernoulli(self.rngs(), 1.0 - self.p, X.shape)
        return jnp.where(keep, X / (1.0 - self.p), jnp.zeros_like(X))


IMPL = Dropout
