"""The one n/a exception, in a leaf module so that every protocol area imports it without importing the
package (which imports the areas)."""
from __future__ import annotations

from dataclasses import dataclass

from .. import wire


class NotApplicable(Exception):
    """The one way to say "this check does not apply here, because REASON", end to end: adapters (the framework
    lacks the mechanism), checks (this layer has no such thing) and the contract's keys (``checks.applicable``)
    all raise or return it; the executor's wire carries it as its one ``not_applicable`` field; the runner
    records it as outcome ``skipped`` with ``not_applicable`` true and ``message`` the reason; every view shows
    that record as n/a with the message. Defined here, where both sides import it without importing a framework
    or each other (``record`` re-exports it).

    Not a plain skip (``checks.CheckSkipped``, a record with ``not_applicable`` false): see the comment there."""

    def __init__(self, reason: str, code: str = "", source: str = ""):
        super().__init__(reason)
        self.reason = reason
        # the reason's id in ``check_catalog.NA_REASONS`` (the closed list each check declares); ``source`` only for
        # an n/a made of others (``check_catalog.na_of``): the judge reads who it rests on from the catalogue
        # (``check_catalog.na_source``), never from the executor's word
        self.code = code
        self.source = source


@wire.reply("protocol.NotApplicablePart")
@dataclass(frozen=True)
class NotApplicablePart:
    """A part of a reply that does not apply here (one way of several, one policy, one gradient), with why: the
    value a reply holds where the rest of the reply goes on (``NotApplicable`` ends the whole call). Its text is
    "n/a: REASON", as every view shows an n/a."""
    reason: str     # why, in words
    code: str = ""  # the reason's id in ``check_catalog.NA_REASONS``, where one is given

    def __str__(self) -> str:
        return f"n/a: {self.reason}"
