"""PyTorch layers that run but do not survive the framework's own save formats (the export check)."""
import torch

from tests.mutants.base_torch import RMSNorm
from tests.mutants.catalogue import Mutant


class LambdaAttribute(RMSNorm):
    """An activation kept as a lambda attribute: torch.save of the whole module cannot pickle it."""
    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        self.post = lambda t: t  # noqa: E731

    def forward(self, X):
        return self.post(super().forward(X))


class RandomNonPersistentBuffer(RMSNorm):
    """A random offset kept out of checkpoints (persistent=False): a fresh instance draws another."""
    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        self.register_buffer("offset", torch.randn(d) * 1e-3, persistent=False)

    def forward(self, X):
        return super().forward(X) + self.offset


class NaNGuard(RMSNorm):
    """Refuses NaN inputs with a Python `if` on a tensor's value: right eagerly, but torch.export traces with
    symbolic values and cannot decide the branch."""
    def forward(self, X):
        if torch.isnan(X).any():
            raise ValueError("RMSNorm got NaN inputs")
        return super().forward(X)


class KeysRenamedOnSave(RMSNorm):
    """Saves its gain under the name other checkpoints use ('weight') through a state_dict hook, with no
    matching load hook: a fresh instance, whose slot is 'gain', refuses its own checkpoint."""
    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        self.register_state_dict_post_hook(_gain_as_weight)


def _gain_as_weight(module, state_dict, prefix, local_metadata):
    state_dict[prefix + "weight"] = state_dict.pop(prefix + "gain")


class EpsOnTheClass(RMSNorm):
    """Keeps eps on the class (`type(self).eps = eps`), a setting shared by every instance: the pickle of an
    instance does not hold it, so a process that loads the pickle without constructing one has the class's
    default."""
    eps = 1e-5

    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        del self.eps   # the instance's own, which the pickle would hold
        type(self).eps = eps


MUTANTS = [
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:LambdaAttribute", "export",
           "torch.save of a whole module pickles every attribute"),
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:RandomNonPersistentBuffer", "export",
           "state_dict: case 'random': loaded in a fresh process, the layer is not bit-equal",
           also=('serialization', 'values'), blocked=('compiled', 'native', 'properties')),
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:NaNGuard", "export",
           "Python control flow on tensor values", also=('devices', 'batching', 'abstract')),
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:KeysRenamedOnSave", "export",
           "does not take the saved state", also=('serialization', 'strict_loading')),
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:EpsOnTheClass", "export",
           "a class attribute changed at run time"),
]
