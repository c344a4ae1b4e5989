"""Fixtures the harness's own tests share."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"


def executor_pythons(framework: str) -> dict:
    """The ``pythons`` a Session needs for ``framework`` (MXNet lives in its own environment); skips the
    test where the framework is not here."""
    from layer_conformance import adapters
    if framework == "mxnet":
        if not MXNET_PYTHON.exists():
            pytest.skip("no .venv-mxnet here")
        return {"mxnet": str(MXNET_PYTHON)}
    if not adapters.installed(framework):
        pytest.skip(f"{framework} is not installed")
    return {}


@pytest.fixture(scope="module")
def sessions():
    """``sessions(framework)``: one executor Session per framework for the module's tests, closed after."""
    from layer_conformance.executor import Session
    made = {}

    def get(framework):
        if framework not in made:
            made[framework] = Session(executor_pythons(framework))
        return made[framework]
    yield get
    for s in made.values():
        s.close()
