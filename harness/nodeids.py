"""The one definition of a conformance node id,
``<file>::<contract>[<impl->framework-device[-dtype]]::<check>``.

The plugin builds ids with ``target_name``; the xdist scheduler (grouping) and the crash report (a
record rebuilt from the id alone) read them back with ``parse``. The dtype part is there only for a
dtype a contract's ``dtypes`` adds; the cases' own dtype keeps the id it always had.
"""
from __future__ import annotations

import re

DTYPES = ("float16", "bfloat16", "float32", "float64")
_DTYPE = "|".join(DTYPES)
# a device is never a dtype's name, so ``torch-cpu-bfloat16`` reads framework torch, device cpu, dtype bfloat16
_ID = re.compile(r"(?:^|::)(?P<contract>[^:\[]+)\[(?:(?P<impl>.*)-)?(?P<framework>[a-z]+)-"
                 rf"(?P<device>(?!(?:{_DTYPE})\])[a-z0-9:]+)(?:-(?P<dtype>{_DTYPE}))?\]"
                 r"::(?P<check>[a-z_]+)(?:@.*)?$")


def target_name(contract: str, impl_label: str | None, framework: str, device: str, dtype: str | None = None) -> str:
    """``rmsnorm[torch-cpu]`` for a bundled implementation, ``rmsnorm[RMSNorm-torch-cpu]`` for a user's,
    ``rmsnorm[torch-cpu-bfloat16]`` in a dtype the contract adds."""
    parts = ([impl_label] if impl_label else []) + [framework, device] + ([dtype] if dtype else [])
    return f"{contract}[{'-'.join(parts)}]"


def parse(nodeid: str) -> dict | None:
    """{contract, impl, framework, device, dtype, check} of a conformance node id (impl '' when bundled,
    dtype '' for the cases' own), else None."""
    m = _ID.search(nodeid)
    if not m:
        return None
    out = m.groupdict()
    out["impl"] = out["impl"] or ""
    out["dtype"] = out["dtype"] or ""
    return out
