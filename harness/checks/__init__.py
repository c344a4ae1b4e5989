"""The checks. Each is a function of a CheckContext, written once for every framework.

It returns None or a dict of details (passed), raises CheckFailed (failed) or CheckSkipped;
the adapter's ``Unsupported`` becomes "n/a" in the runner.
To add a check: write ``check_<id>`` in the module for its area and list it in ``CHECKS``;
the id is part of the public interface (test ids, results files, expectations).
"""
from .base import CheckContext, CheckFailed, CheckSkipped, unexpected_error
from .numerics import check_gradients, check_native, check_values
from .registration import check_composition, check_device_parity, check_devices, check_serialization
from .state import check_buffers, check_parameters
from .forward import check_forward_mode
from .second_order import check_second_order
from .loading import check_strict_loading
from .modes import check_modes
from .properties import check_properties
from .compiled import check_compiled
from .export import check_export
from .mixed_precision import check_mixed_precision

CHECKS = {
    "parameters": check_parameters,
    "buffers": check_buffers,
    "composition": check_composition,
    "serialization": check_serialization,
    "devices": check_devices,
    "device_parity": check_device_parity,
    "values": check_values,
    "native": check_native,
    "gradients": check_gradients,
    "strict_loading": check_strict_loading,
    "modes": check_modes,
    "properties": check_properties,
    "forward_mode": check_forward_mode,
    "second_order": check_second_order,
    "compiled": check_compiled,
    "export": check_export,
    "mixed_precision": check_mixed_precision,
}

# Checks a run includes only when asked (--check ID): mixed_precision judges a use that not every layer meets.
OPT_IN = {
    "mixed_precision": "runs every layer under each framework's mixed-precision mechanisms, which a layer used only "
                       "in its own dtype never meets (about 1.03x the matrix's time)",
}
DEFAULT_CHECKS = [c for c in CHECKS if c not in OPT_IN]

# The checks that compare values or gradients, and so run once per dtype a contract's ``dtypes`` lists
# (a target of its own, ``rmsnorm[torch-cpu-bfloat16]``). The others are about registration, state,
# saving and devices, which a dtype does not change: they run once, in the cases' own dtype. compiled
# and export compare a compiled or reloaded layer with the same layer run eagerly, in whatever dtype,
# so a dtype adds nothing there but their cost.
PER_DTYPE = ("values", "native", "gradients", "forward_mode", "second_order", "properties", "modes")

# The checks that load a layer in a fresh process (``CheckContext.fresh_adapter``): a run that includes one
# starts each framework's zygote, the process fresh executors are forked from, with its other executors.
FRESH_PROCESS = ("export", "mixed_precision")

# The checks that, in a run of one process (-n 0), run on a second lane of layer executors, on a thread beside
# the others (layer_conformance.lane): together they take about as long as all the others, and the others leave a core idle.
ALONGSIDE = ("compiled", "export")

__all__ = ["ALONGSIDE", "CHECKS", "DEFAULT_CHECKS", "FRESH_PROCESS", "OPT_IN", "PER_DTYPE", "CheckContext", "CheckFailed", "CheckSkipped", "unexpected_error"]
