"""The PyTorch adapter: ``FrameworkAdapter``, composed of one class per area (``core.py`` ... ``shapes.py``,
the same file names in every framework folder; ``layer_conformance.protocol`` declares each area's methods).
Importing this package imports the framework (``layerside.get_adapter`` does it only when asked).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

from .core import TorchCore
from .autodiff import TorchAutodiff
from .compile import TorchCompile
from .export import TorchExport
from .precision import TorchPrecision
from .batching import TorchBatching
from .construction import TorchConstruction
from .layout import TorchLayout
from .shapes import TorchShapes


class FrameworkAdapter(TorchCore, TorchAutodiff, TorchCompile, TorchExport, TorchPrecision,
                       TorchBatching, TorchConstruction, TorchLayout, TorchShapes):
    """Every area of PyTorch at once (the protocol's ``Adapter``)."""
