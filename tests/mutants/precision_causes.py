"""The precision causes' opening words (layer_conformance.checks.mistakes: computes_narrow, computes_float32), which the
``<framework>_precision`` mutants' failures must carry; no framework is imported here."""
NARROW = "The layer computes in {dtype} arithmetic: the same layer in float32, rounded to {dtype}, is within tolerance"
FLOAT32 = "The layer computes float64 inputs at float32 precision (error "
