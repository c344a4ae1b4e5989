"""Layer conformance: check custom layers and custom-gradient functions against contracts."""
__version__ = "0.1.0"
