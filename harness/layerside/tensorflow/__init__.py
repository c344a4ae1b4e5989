"""The TensorFlow / Keras 3 adapter: ``FrameworkAdapter``, composed of one class per area (``core.py`` ... ``shapes.py``,
the same file names in every framework folder; ``layer_conformance.protocol`` declares each area's methods).
Importing this package imports the framework (``layerside.get_adapter`` does it only when asked).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the adapter drives Keras through TF's tape and devices

from .core import TensorFlowCore  # noqa: E402
from .autodiff import TensorFlowAutodiff  # noqa: E402
from .compile import TensorFlowCompile  # noqa: E402
from .export import TensorFlowExport  # noqa: E402
from .precision import TensorFlowPrecision  # noqa: E402
from .batching import TensorFlowBatching  # noqa: E402
from .construction import TensorFlowConstruction  # noqa: E402
from .layout import TensorFlowLayout  # noqa: E402
from .shapes import TensorFlowShapes  # noqa: E402


class FrameworkAdapter(TensorFlowCore, TensorFlowAutodiff, TensorFlowCompile, TensorFlowExport, TensorFlowPrecision,
                       TensorFlowBatching, TensorFlowConstruction, TensorFlowLayout, TensorFlowShapes):
    """Every area of TensorFlow / Keras 3 at once (the protocol's ``Adapter``)."""
