"""The ``soorma`` command (placeholder until the CLI lands)."""

from __future__ import annotations


def main() -> None:
    raise SystemExit("soorma CLI not built yet")
