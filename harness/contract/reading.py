"""Reading values that may be of any type: the rules run even where the schema found problems, so they trust
no type, and neither does what the Contract object derives from the data as read."""
from __future__ import annotations

def _map(x) -> dict:
    return x if isinstance(x, dict) else {}


def _seq(x) -> list:
    return x if isinstance(x, list) else []


def _str(x) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{x!r} is not a string")
    return x


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _floating(dtype) -> bool:
    return isinstance(dtype, str) and dtype.startswith(("float", "bfloat"))

