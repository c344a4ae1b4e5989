"""The one definition of a conformance node id, ``<file>::<contract>[<impl->framework-device]::<check>``.

The plugin builds ids with ``target_name``; the xdist scheduler (grouping) and the crash report (a
record rebuilt from the id alone) read them back with ``parse``.
"""
from __future__ import annotations

import re

_ID = re.compile(r"(?:^|::)(?P<contract>[^:\[]+)\[(?:(?P<impl>.*)-)?(?P<framework>[a-z]+)-(?P<device>[a-z0-9:]+)\]"
                 r"::(?P<check>[a-z_]+)(?:@.*)?$")


def target_name(contract: str, impl_label: str | None, framework: str, device: str) -> str:
    """``rmsnorm[torch-cpu]`` for a bundled implementation, ``rmsnorm[RMSNorm-torch-cpu]`` for a user's."""
    parts = ([impl_label] if impl_label else []) + [framework, device]
    return f"{contract}[{'-'.join(parts)}]"


def parse(nodeid: str) -> dict | None:
    """{contract, impl, framework, device, check} of a conformance node id (impl '' when bundled), else None."""
    m = _ID.search(nodeid)
    if not m:
        return None
    out = m.groupdict()
    out["impl"] = out["impl"] or ""
    return out
