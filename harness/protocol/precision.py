"""Other dtypes: a copy of the layer cast to a contract's dtype, and the framework's mixed-precision mechanisms.

The layer side implements this protocol per framework in ``layerside/<framework>/precision.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from . import NotApplicable


class PrecisionProtocol:
    def to_float64(self, layer):
        """The layer in float64 for finite differences, or None where that is not possible."""
        return self.to_dtype(layer, "float64")

    def to_dtype(self, layer, dtype: str):
        """A copy of the layer with its floating state in ``dtype`` (a contract's ``dtypes``), or None
        where the framework cannot cast it; a function (not a layer) as it is. Raise ``NotApplicable``
        for a dtype the framework does not have."""
        return None

    # -- mixed precision (the ``mixed_precision`` check) ------------------------------------------
    def mixed_precision_policies(self, obj, function: bool = False) -> list[dict]:
        """The framework's mixed-precision mechanisms for ``obj`` (the user's class or factory; a function
        contract's function when ``function``), each plain data: {"policy": its name, in the framework's
        words, "variables": the dtype variables must keep, "compute": the 16-bit dtype computed in,
        "output": the dtype the output must have, or None where the mechanism does not fix it,
        "states_compute": the layer reports its compute dtype (Keras ``compute_dtype``), "isolated": applying
        it changes the process for good (run in a fresh one)}, or {"policy": name, "not_applicable": why}.
        Raises NotApplicable when the framework has none for ``obj``."""
        raise NotImplementedError

    def mixed_precision_run(self, impl, constructor, inputs: list, policy: str, assign=None, cotangent=None,
                            wrt=()) -> dict:
        """``impl`` (a handle, or ``module:attr`` in a fresh process) constructed from ``constructor`` (None for a
        function) under ``policy``, built, its state names in ``assign`` set, and called on ``inputs`` in
        inference mode; with ``cotangent``, one backward pass for the inputs in ``wrt`` and every trainable
        variable. Returns plain data: {"mechanism": how the policy was applied, in words, "variables": {name:
        dtype} after the call, "compute_dtype": the layer's own statement or None, "output_dtype",
        "output": numpy (16-bit floats widened to float32), "gradients": {trainable name: dtype or None},
        "input_dtypes", "input_gradients": [dtype or None per input], "notes": [what else was seen]}."""
        raise NotImplementedError
