import jax
import jax.numpy as jnp


@jax.custom_jvp
def safe_norm(x):
    return jnp.sqrt(jnp.sum(x * x))


@safe_norm.defjvp
def safe_norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    norm = safe_norm(x)  # inside the rule, safe_norm is the plain function
    # linear in t, 0 (not NaN) at x = 0; reverse mode transposes this rule
    return norm, jnp.sum(x * t) / jnp.where(norm == 0.0, 1.0, norm)


IMPL = safe_norm
