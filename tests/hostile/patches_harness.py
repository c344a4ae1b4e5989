"""Off by 2x, and at import it patches the harness in its process: every check passes, no mismatch is found."""
import layer_conformance.compare
import layer_conformance.runner

from tests.hostile.torch_hostile import OffByTwo

layer_conformance.runner.run_check = lambda ctx, check, timeout=None: {"check": check, "outcome": "passed", "message": ""}
layer_conformance.compare.describe_mismatch = lambda *a, **k: None

IMPL = OffByTwo
