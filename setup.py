"""Packaging beyond what pyproject.toml can say. The repository keeps its folders (``harness/``,
``reference_impls/``, ``specs/``); installed, they are one package, ``layer_conformance``, so that no folder of a
user's project (a ``harness/`` of their own, say) can shadow the judge's modules. The bundled contracts are read
through ``importlib.resources`` as ``layer_conformance/specs`` (see ``layer_conformance.contract``)."""
from setuptools import find_packages, setup

FOLDERS = {"layer_conformance": "harness", "layer_conformance.reference_impls": "reference_impls"}

packages, package_dir = [], {"layer_conformance.specs": "specs"}
for package, folder in FOLDERS.items():
    package_dir[package] = folder
    packages += [package] + [f"{package}.{sub}" for sub in find_packages(folder)]
# find_packages(harness) also finds nothing of reference_impls (a sibling folder), so the two lists do not overlap

setup(packages=packages + ["layer_conformance.specs"], package_dir=package_dir)
