"""Settings for the memory-service."""

from __future__ import annotations

from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8083
DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_PRUNE_INTERVAL_SECONDS = 3600.0


class Settings(ServiceSettings):
    """Memory-service settings (environment prefix ``SOORMA_``).

    Attributes:
        memory_database_url: Per-service override of ``SOORMA_DATABASE_URL``
            (``SOORMA_MEMORY_DATABASE_URL``). Unset: SQLite file ``memory.db`` under
            ``data_dir``.
        memory_retention_days: Finished plans (and their contexts and working memory)
            untouched for longer than this are pruned. ``0`` disables pruning.
        memory_prune_interval_seconds: How often the background pruner runs.
    """

    memory_database_url: str | None = None
    memory_retention_days: float = DEFAULT_RETENTION_DAYS
    memory_prune_interval_seconds: float = DEFAULT_PRUNE_INTERVAL_SECONDS
