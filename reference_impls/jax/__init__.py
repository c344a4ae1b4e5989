"""Correct JAX / Flax NNX implementations of the bundled contracts: ``<contract>.py`` defines ``IMPL``."""
