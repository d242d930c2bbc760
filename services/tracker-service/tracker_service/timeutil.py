"""UTC helpers: SQLite hands timestamps back naive; they were written as UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def now() -> datetime:
    return datetime.now(UTC)
