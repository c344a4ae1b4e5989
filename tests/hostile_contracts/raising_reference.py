"""A reference module that fails while it is imported (for reference_raises.yaml)."""
raise RuntimeError("broken on purpose")
