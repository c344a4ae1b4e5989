"""The README's terminal examples are the harness's real output: scripts/readme_examples.py runs each example's
layer through the public command line in a project directory of its own and compares every README block between
its markers with what the run printed (normalized only where runs differ: the directory, the duration, versions on
the platform line). A changed message, hint or layout fails here until the README is regenerated
(``python scripts/readme_examples.py``)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "readme_examples.py"


@pytest.mark.slow   # four runs of the torch rmsnorm matrix, about a minute each on a loaded machine
def test_readme_examples_are_the_real_output():
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, (
        "README.md's examples differ from the real output; regenerate them with python scripts/readme_examples.py\n"
        + proc.stdout[-8000:] + proc.stderr[-4000:])
