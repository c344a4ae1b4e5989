import jax
import jax.numpy as jnp


@jax.custom_vjp
def linear(W, x, b):
    return W @ x + b


def linear_fwd(W, x, b):
    return W @ x + b, (W, x)  # the residuals the VJP needs


def linear_bwd(residuals, g):
    W, x = residuals
    # never the Jacobian: an outer product and a transposed product
    return jnp.outer(g, x), W.T @ g, g


linear.defvjp(linear_fwd, linear_bwd)

IMPL = linear
