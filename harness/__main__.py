"""``python -m layer_conformance``: see layer_conformance.cli."""
import sys

from .cli import main

sys.exit(main())
