"""Third-party JAX code bound to the bundled contracts (see tests/zoo/bindings.yaml)."""
import jax
import optax


def softmax_cross_entropy(logits, labels):
    """optax's softmax cross-entropy; labels are data, so their gradient is stopped."""
    return optax.softmax_cross_entropy(logits, jax.lax.stop_gradient(labels))


def flax_rmsnorm(d, eps):
    """flax.nnx.RMSNorm (argument names num_features, epsilon; it needs rngs)."""
    from flax import nnx
    return nnx.RMSNorm(num_features=d, epsilon=eps, rngs=nnx.Rngs(0))
