"""The MXNet Gluon 1.9.1 adapter: ``FrameworkAdapter``, composed of one class per area (``core.py`` ... ``shapes.py``,
the same file names in every framework folder; ``layer_conformance.protocol`` declares each area's methods).
Importing this package imports the framework (``layerside.get_adapter`` does it only when asked).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

# MXNet 1.9.1 imports on numpy >= 1.24 only with the removed numpy aliases put back (before any area imports it)
from ..mxnet_shim import apply as _apply_shim

_apply_shim()

from .core import MXNetCore  # noqa: E402
from .autodiff import MXNetAutodiff  # noqa: E402
from .compile import MXNetCompile  # noqa: E402
from .export import MXNetExport  # noqa: E402
from .precision import MXNetPrecision  # noqa: E402
from .batching import MXNetBatching  # noqa: E402
from .construction import MXNetConstruction  # noqa: E402
from .layout import MXNetLayout  # noqa: E402
from .shapes import MXNetShapes  # noqa: E402


class FrameworkAdapter(MXNetCore, MXNetAutodiff, MXNetCompile, MXNetExport, MXNetPrecision,
                       MXNetBatching, MXNetConstruction, MXNetLayout, MXNetShapes):
    """Every area of MXNet Gluon 1.9.1 at once (the protocol's ``Adapter``)."""
