import jax
import jax.numpy as jnp


@jax.custom_vjp
def clipped_relu(x):
    return jnp.maximum(x, 0.0)


def clipped_relu_fwd(x):
    return jnp.maximum(x, 0.0), x  # bwd needs x for the ReLU mask


def clipped_relu_bwd(x, g):
    # ReLU gradient (zero at x = 0), then clipped to [-1, 1]
    return (jnp.clip(g * (x > 0).astype(g.dtype), -1.0, 1.0),)


clipped_relu.defvjp(clipped_relu_fwd, clipped_relu_bwd)

IMPL = clipped_relu
