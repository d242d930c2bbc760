"""Versioned records: load one, replace it if nobody wrote first, re-apply a change if they did.

Plans and task contexts live in the memory service as records that carry a version. A
:class:`VersionedStore` loads a record and replaces it naming the version its copy was
read at; :func:`apply_change` is the one way the SDK changes such a record: it applies a
change to the copy, writes the result, and on a ``VersionConflict`` reloads and applies
the change again to the fresh copy, at most ``retries`` times (waiting as
:func:`soorma._concurrency.retry_on_conflict` does between attempts).

A change is a function from a record to a :class:`Change`: the record to write (``None``:
nothing to write) and an outcome for the caller. It may run several times, so it must not
publish or write anything itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from soorma._concurrency import CONFLICT_RETRIES, backoff, retry_on_conflict
from soorma_common.clock import SYSTEM_CLOCK, Clock


class Versioned(Protocol):
    """A record with a stored version."""

    @property
    def version(self) -> int: ...


R = TypeVar("R", bound=Versioned)
T = TypeVar("T")


class VersionedStore(Protocol[R]):
    """Where records of one kind are kept (plans, task contexts)."""

    async def load(self, key: str) -> R:
        """The stored record ``key`` (raises the kind's ``NotFound`` when there is none)."""
        ...

    async def replace(self, record: R, *, expected_version: int) -> R:
        """Store ``record`` if the stored version is still ``expected_version``; the
        stored record (``VersionConflict`` when another writer got there first)."""
        ...


@dataclass(frozen=True, slots=True)
class Change(Generic[R, T]):
    """What a change makes of a record: the record to write (``None``: none) and an
    outcome for the caller."""

    record: R | None
    outcome: T


@dataclass(frozen=True, slots=True)
class Applied(Generic[R, T]):
    """The result of :func:`apply_change`.

    Attributes:
        record: The stored record after the write, or the copy the change left alone.
        outcome: What the last application of the change returned.
        written: Whether a write happened.
    """

    record: R
    outcome: T
    written: bool


ChangeFn = Callable[[R], Change[R, T] | Awaitable[Change[R, T]]]


class _Attempts(Generic[R, T]):
    """The copy a change is applied to, across the attempts of one :func:`apply_change`."""

    def __init__(
        self,
        store: VersionedStore[R],
        key: str,
        record: R,
        change: ChangeFn[R, T],
        rebase: Callable[[R], R] | None,
        verified: bool,
    ) -> None:
        self.store, self.key, self.record = store, key, record
        self.change, self.rebase, self.verified = change, rebase, verified

    async def write(self) -> Applied[R, T]:
        while True:
            result = self.change(self.record)
            change = await result if inspect.isawaitable(result) else result
            if change.record is not None or self.verified:
                break
            # A copy that may be stale decided to write nothing: decide again on a
            # fresh one before the caller acts on that decision.
            await self.reload()
        if change.record is None:
            return Applied(self.record, change.outcome, written=False)
        stored = await self.store.replace(change.record, expected_version=self.record.version)
        return Applied(stored, change.outcome, written=True)

    async def reload(self) -> None:
        fresh = await self.store.load(self.key)
        self.record = fresh if self.rebase is None else self.rebase(fresh)
        self.verified = True


async def apply_change(
    store: VersionedStore[R],
    key: str,
    record: R,
    change: ChangeFn[R, T],
    *,
    rebase: Callable[[R], R] | None = None,
    verified: bool = True,
    retries: int = CONFLICT_RETRIES,
    delay: Callable[[int], float] = backoff,
    clock: Clock = SYSTEM_CLOCK,
) -> Applied[R, T]:
    """Apply ``change`` to ``record`` and store the result; on a conflict reload and
    apply it again.

    Args:
        store: Where the record is kept.
        key: The record's key in ``store``.
        record: The copy to start from (its ``version`` is the one the write expects).
        change: The change (sync or async); it runs once per attempt.
        rebase: Makes the copy to re-apply ``change`` to out of the reloaded record
            (e.g. merges local edits onto it); the reloaded record itself without one.
            It may raise to stop (e.g. someone else now owns the record).
        verified: ``False`` when ``record`` may be stale (read from a cache): then a
            change that writes nothing is applied once more to a freshly loaded copy.
        retries: Reloads after a conflict before ``VersionConflict`` reaches the caller.
        delay: Seconds to wait before the retry after the n-th conflict.
        clock: What the waits between attempts are slept on.

    Raises:
        VersionConflict: still conflicting after ``retries`` reloads.
    """
    attempts = _Attempts(store, key, record, change, rebase, verified)
    return await retry_on_conflict(
        attempts.write, attempts.reload, retries=retries, delay=delay, clock=clock
    )


__all__ = ["Applied", "Change", "VersionedStore", "apply_change"]
