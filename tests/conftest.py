"""Fixtures the harness's own tests share (plain helpers and sample data: tests/support.py)."""
import pytest

from tests.support import executor_pythons


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


@pytest.fixture
def session():
    """A plain executor Session (no MXNet environment) for one test, closed after. test_export.py and
    test_hints.py keep module-scoped sessions of their own (with MXNet's python), which override this one."""
    from layer_conformance.executor.session import Session
    s = Session()
    yield s
    s.close()
