import jax
import jax.numpy as jnp


@jax.custom_vjp
def log1pexp(x):
    return jnp.logaddexp(x, 0.0)  # log(1 + exp(x)), finite for large x


def log1pexp_fwd(x):
    return log1pexp(x), x  # (output, residuals for bwd)


def log1pexp_bwd(x, g):
    # exp(x) / (1 + exp(x)) overflows to inf / inf; sigmoid is stable
    return (g * jax.nn.sigmoid(x),)


log1pexp.defvjp(log1pexp_fwd, log1pexp_bwd)

IMPL = log1pexp
