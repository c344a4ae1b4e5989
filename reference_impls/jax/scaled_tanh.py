import jax
import jax.numpy as jnp


@jax.custom_vjp
def scaled_tanh(x):
    return jnp.tanh(x)


def scaled_tanh_fwd(x):
    y = jnp.tanh(x)
    return y, y  # the derivative needs only tanh(x)


def scaled_tanh_bwd(y, g):
    return (0.5 * g * (1.0 - y * y),)  # the true gradient, scaled by 0.5


scaled_tanh.defvjp(scaled_tanh_fwd, scaled_tanh_bwd)

IMPL = scaled_tanh
