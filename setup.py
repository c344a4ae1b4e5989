"""Packaging beyond what pyproject.toml can say: the bundled contracts stay in the repository's
top-level ``specs/`` and are shipped inside the package as ``harness/specs`` (read through
``importlib.resources``; see ``harness.contract``)."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["harness", "harness.*", "reference_impls", "reference_impls.*"])
    + ["harness.specs"],
    package_dir={"harness.specs": "specs"},
)
