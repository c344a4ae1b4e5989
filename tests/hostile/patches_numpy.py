"""Off by 2x, and at import it patches numpy so that every comparison in its process says "equal"."""
import numpy

from tests.hostile.torch_hostile import OffByTwo

numpy.abs = lambda x, *a, **k: numpy.zeros_like(numpy.asarray(x, dtype=float))
numpy.isclose = lambda a, b, *x, **k: numpy.ones(numpy.broadcast(a, b).shape, dtype=bool)
numpy.allclose = lambda *a, **k: True
numpy.array_equal = lambda *a, **k: True

IMPL = OffByTwo
