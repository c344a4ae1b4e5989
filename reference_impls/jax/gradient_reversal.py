import jax
import jax.numpy as jnp


@jax.custom_vjp
def gradient_reversal(x, lam):
    return x


def gradient_reversal_fwd(x, lam):
    return x, lam  # lam saved as the residual


def gradient_reversal_bwd(lam, g):
    # reversed and scaled; lam is a setting, not data: None, no cotangent
    return -jnp.asarray(lam, g.dtype) * g, None


gradient_reversal.defvjp(gradient_reversal_fwd, gradient_reversal_bwd)

IMPL = gradient_reversal
