"""Other dtypes: a copy of the layer cast to a contract's dtype, and the framework's mixed-precision mechanisms.

The layer side implements this protocol per framework in ``layerside/<framework>/precision.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import wire
from .not_applicable import NotApplicablePart
from .not_applicable import NotApplicable


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
    def mixed_precision_policies(self, obj, function: bool = False) -> list[MixedPrecisionPolicy]:
        """The framework's mixed-precision mechanisms for ``obj`` (the user's class or factory; a function
        contract's function when ``function``), one ``MixedPrecisionPolicy`` each. Raises NotApplicable when
        the framework has none for ``obj``."""
        raise NotImplementedError

    def mixed_precision_run(self, impl, constructor, inputs: list, policy: str, assign=None, cotangent=None,
                            wrt=()) -> MixedPrecisionRun:
        """``impl`` (a handle, or ``module:attr`` in a fresh process) constructed from ``constructor`` (None for a
        function) under ``policy``, built, its state names in ``assign`` set, and called on ``inputs`` in
        inference mode; with ``cotangent``, one backward pass for the inputs in ``wrt`` and every trainable
        variable. Returns a ``MixedPrecisionRun``."""
        raise NotImplementedError


@wire.reply("precision.MixedPrecisionPolicy")
@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """``mixed_precision_policies``: one mixed-precision mechanism of the framework, or why it does not apply."""
    policy: str                      # its name, in the framework's words
    variables: str | None = None     # the dtype variables must keep
    compute: str | None = None       # the 16-bit dtype computed in
    output: str | None = None        # the dtype the output must have; None where the mechanism does not fix it
    states_compute: bool = False     # the layer reports its compute dtype (Keras ``compute_dtype``)
    isolated: bool = False           # applying it changes the process for good: run in a fresh one
    not_applicable: NotApplicablePart | None = None  # why it does not apply (then nothing else is said)


@wire.reply("precision.MixedPrecisionRun")
@dataclass(frozen=True)
class MixedPrecisionRun:
    """``mixed_precision_run``: the layer built and called (and differentiated) under one policy, in dtypes."""
    mechanism: str                    # how the policy was applied, in words
    output_dtype: str                 # the output's dtype
    output: Any                       # the output, numpy (16-bit floats widened to float32)
    variables: dict                   # variable name -> its dtype after the call
    gradients: dict                   # trainable name -> its gradient's dtype, or None
    input_dtypes: tuple               # each input's dtype
    input_gradients: tuple            # each input's gradient's dtype, or None
    compute_dtype: str | None = None  # the layer's own statement of its compute dtype, or None
    notes: tuple[str, ...] = ()       # what else was seen, in words
