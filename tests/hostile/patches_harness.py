"""Off by 2x, and at import it patches the harness in its process: every check passes, no mismatch is found."""
import harness.compare
import harness.runner

from tests.hostile.torch_hostile import OffByTwo

harness.runner.run_check = lambda ctx, check, timeout=None: {"check": check, "outcome": "passed", "message": ""}
harness.compare.describe_mismatch = lambda *a, **k: None

IMPL = OffByTwo
