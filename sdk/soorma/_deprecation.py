"""Renamed API: the old name keeps working for one release and warns when used."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any


def _warn(owner: str, old: str, new: str) -> None:
    warnings.warn(
        f"{owner}.{old} is deprecated and will be removed in the next release; use {owner}.{new}",
        DeprecationWarning,
        stacklevel=3,
    )


def renamed_method(owner: str, old: str, new: str) -> Callable[..., Any]:
    """A method ``old`` that warns and calls ``new`` (sync or async alike)."""

    def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        _warn(owner, old, new)
        return getattr(self, new)(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated alias of :meth:`{new}`."
    return alias


def renamed_property(owner: str, old: str, new: str) -> property:
    """A read-only property ``old`` that warns and returns ``new``'s value."""

    def getter(self: Any) -> Any:
        _warn(owner, old, new)
        return getattr(self, new)

    return property(getter, doc=f"Deprecated alias of :attr:`{new}`.")


def renamed_to_method(owner: str, old: str, new: str) -> property:
    """A property ``old`` whose value is now the method ``new()``'s result."""

    def getter(self: Any) -> Any:
        _warn(owner, old, f"{new}()")
        return getattr(self, new)()

    return property(getter, doc=f"Deprecated: call :meth:`{new}`.")


__all__ = ["renamed_method", "renamed_property", "renamed_to_method"]
