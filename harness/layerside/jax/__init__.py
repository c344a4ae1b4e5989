"""The JAX / Flax NNX adapter: ``FrameworkAdapter``, composed of one class per area (``core.py`` ... ``shapes.py``,
the same file names in every framework folder; ``layer_conformance.protocol`` declares each area's methods).
Importing this package imports the framework (``layerside.get_adapter`` does it only when asked).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

from .core import JaxCore
from .autodiff import JaxAutodiff
from .compile import JaxCompile
from .export import JaxExport
from .precision import JaxPrecision
from .batching import JaxBatching
from .construction import JaxConstruction
from .layout import JaxLayout
from .shapes import JaxShapes


class FrameworkAdapter(JaxCore, JaxAutodiff, JaxCompile, JaxExport, JaxPrecision,
                       JaxBatching, JaxConstruction, JaxLayout, JaxShapes):
    """Every area of JAX / Flax NNX at once (the protocol's ``Adapter``)."""
