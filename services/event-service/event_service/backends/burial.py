"""When a delivery about to be made again goes to the dead-letter topic instead, and why.

Two ways of counting, chosen per group stream:

- every delivery counts (``hard_cap=None``, what clients that report nothing get): an
  entry delivered ``max_deliveries`` times is buried;
- only *started* deliveries count (``hard_cap`` set; the client reports handler starts
  through ``extend``'s ``running`` list, and a nack is a started delivery too): an entry
  whose handler was running in ``max_deliveries`` deliveries is buried (a poison event
  killing its consumers), and any entry delivered ``hard_cap`` times is, started or not.
  A delivery that only waited in the buffer of a process that died costs nothing
  below the cap.

A started mark is ``"<delivery count when seen running>:<started deliveries>"``, kept
per entry beside its last nack reason, so a handler reported running several times in
one delivery counts once.
"""

from __future__ import annotations


def started_of(mark: str | bytes | None) -> int:
    """How many deliveries a started mark counts (0 for none)."""
    if not mark:
        return 0
    text = mark.decode() if isinstance(mark, bytes) else mark
    return int(text.rpartition(":")[2] or 0)


def next_mark(mark: str | bytes | None, deliveries: int) -> str:
    """The mark after seeing the handler running in delivery number ``deliveries``."""
    if mark:
        text = mark.decode() if isinstance(mark, bytes) else mark
        seen, _, started = text.partition(":")
        if seen == str(deliveries):
            return text
        return f"{deliveries}:{int(started or 0) + 1}"
    return f"{deliveries}:1"


def burial_reason(
    *,
    deliveries: int,
    started: int,
    max_deliveries: int,
    hard_cap: int | None,
    nack_reason: str | None,
) -> str | None:
    """Why an entry delivered ``deliveries`` times is dead-lettered, or ``None`` to deliver
    it again (``started``: deliveries that reached a handler)."""
    if hard_cap is None:
        if deliveries < max_deliveries:
            return None
        return nack_reason or f"visibility timeout expired after {deliveries} deliveries"
    if started >= max_deliveries:
        return nack_reason or (
            f"handler was running in {started} deliveries whose consumer stopped "
            f"({deliveries} deliveries in all)"
        )
    if deliveries >= hard_cap:
        return (
            f"delivered {deliveries} times and never finished (a handler started in "
            f"{started} of them); {hard_cap} deliveries is the cap"
        )
    return None
