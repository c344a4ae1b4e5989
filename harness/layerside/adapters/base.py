"""What every framework's adapter derives from: the per-area protocols (``layer_conformance.protocol``), and the
helpers the adapters share."""
from __future__ import annotations

from ...protocol import Adapter as _Protocols
from ...protocol import NotApplicable  # noqa: F401  (re-exported: every adapter imports it from here)
from ...protocol.core import construct, import_spec  # noqa: F401  (re-exported)


class Adapter(_Protocols):
    @staticmethod
    def _abstract_error(exc) -> str:
        """What an abstract evaluation raised, in one line: the type, its message's lines (a Keras error's
        first line only names the call), cut at 600 characters, and where in the user's code."""
        from ...errors import unexpected_error
        text = " ".join(line.strip() for line in unexpected_error(exc).splitlines() if line.strip())
        cut = text.rfind(" (at ")
        body, where = (text[:cut], text[cut:]) if cut > 0 and text.endswith(")") else (text, "")
        return (body if len(body) <= 600 else body[:597] + "...") + where
