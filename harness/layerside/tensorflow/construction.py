"""TensorFlow (Keras 3): the ways real code builds a layer (the ``construction`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import numpy as np
import keras

from ...protocol import NotApplicable, NotApplicablePart
from ...protocol.construction import ConstructionPart, ConstructionProtocol
from ...protocol.core import import_spec


class TensorFlowConstruction(ConstructionProtocol):
    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        layer = self.construct(impl, constructor)
        if not isinstance(layer, keras.layers.Layer):
            raise NotApplicable(f"the constructor makes a {type(layer).__name__}, not a Keras layer", code="not_a_module")
        shapes = [tuple(np.shape(a)) for a in inputs]
        shape = shapes[0] if len(shapes) == 1 else shapes
        part = "build(input_shape) alone, before any call"
        problems, hint = [], None
        try:
            if not layer.built:
                layer.build(shape)
        except Exception as exc:
            problems.append(f"build({shape}) raised {type(exc).__name__}: {exc}")
        built = (sorted(self.trainable(layer)), sorted(self.non_trainable(layer)))
        out = self.call(layer, inputs)
        called = (sorted(self.trainable(layer)), sorted(self.non_trainable(layer)))
        if not problems and built != called:
            problems.append(f"build() alone made {len(built[0])} trainable and {len(built[1])} non-trainable "
                            f"weight(s) ({', '.join(built[0] + built[1]) or 'none'}), the first call "
                            f"{len(called[0])} and {len(called[1])} ({', '.join(called[0] + called[1]) or 'none'}; "
                            f"the contract declares {expected['trainable']} and {expected['non_trainable']}): the "
                            f"call creates weights")
            hint = "construction_weights_in_call"
        parts = [ConstructionPart(part=part, problems=tuple(problems), hint=hint)]
        part = "compute_output_shape on an unbuilt layer"
        if getattr(type(layer), "compute_output_shape", None) is keras.layers.Layer.compute_output_shape:
            parts.append(ConstructionPart(part=part, not_applicable=NotApplicablePart(
                "the layer does not define compute_output_shape (Keras infers the shape from a symbolic call)")))
            return parts
        problems = []
        fresh = self.construct(impl, constructor)
        try:
            said = fresh.compute_output_shape(shape)
        except Exception as exc:
            said = None
            problems.append(f"compute_output_shape({shape}) on an unbuilt layer raised {type(exc).__name__}: {exc} "
                            f"(Keras calls it before build; compute the shape from input_shape and the "
                            f"constructor's arguments, not from weights)")
        # whether the shape it says is the call's is the abstract check's (one mistake, one failing check)
        parts.append(ConstructionPart(part=part, problems=tuple(problems), hint=None))
        return parts
