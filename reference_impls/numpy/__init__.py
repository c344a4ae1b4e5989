"""Numpy references in float64: ``forward(*inputs, **state, **constructor)`` and
``vjp(cotangent, *inputs, **state, **constructor) -> {input or slot name: gradient}``.
They define the expected values; nothing is stored."""
