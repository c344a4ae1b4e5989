import jax
import jax.numpy as jnp


@jax.custom_vjp
def sign_ste(x):
    return jnp.sign(x)


def sign_ste_fwd(x):
    return jnp.sign(x), None  # the identity surrogate needs no residuals


def sign_ste_bwd(residuals, g):
    # Pass the upstream gradient directly, as if forward were the identity
    return (g,)


sign_ste.defvjp(sign_ste_fwd, sign_ste_bwd)

IMPL = sign_ste
