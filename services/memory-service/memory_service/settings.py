"""Settings for the memory-service (environment prefix ``SOORMA_``), grouped by concern.

:class:`Settings` composes servicekit's shared groups with the service's own
(:data:`GROUPS`): where the data lives, retention, the embedder, the bulk-built vector
index and the accelerator switches. Each group reads the same flat variables and can be
built alone (``long_term_retention(settings: RetentionSettings)``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory_service.longterm.segments import (
    DEFAULT_BUILD_MEMORY_MB,
    DEFAULT_IDLE_SECONDS,
    DEFAULT_SEAL_ROWS,
)
from servicekit.settings import ServiceSettings

DEFAULT_PORT = 8083
DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_PRUNE_INTERVAL_SECONDS = 3600.0


_CONFIG = SettingsConfigDict(env_prefix="SOORMA_", extra="ignore")


class MemoryStorageSettings(BaseSettings):
    """Where the memory service keeps its data.

    Attributes:
        memory_database_url: Per-service override of ``SOORMA_DATABASE_URL``
            (``SOORMA_MEMORY_DATABASE_URL``). Unset: SQLite file ``memory.db`` under
            ``data_dir``.
    """

    model_config = _CONFIG

    memory_database_url: str | None = None


class RetentionSettings(BaseSettings):
    """How long finished plans and long-term records are kept (memory_service.retention).

    Attributes:
        memory_retention_days: Finished plans (and their contexts and working memory)
            untouched for longer than this are pruned. ``0`` disables pruning.
        memory_prune_interval_seconds: How often the background pruners run.
        memory_retention_semantic_days / _episodic_days / _procedural_days: Long-term
            records older than this (since their last update) are pruned; ``0`` keeps them.
    """

    model_config = _CONFIG

    memory_retention_days: float = DEFAULT_RETENTION_DAYS
    memory_prune_interval_seconds: float = DEFAULT_PRUNE_INTERVAL_SECONDS
    memory_retention_semantic_days: float = Field(default=0.0, ge=0)
    memory_retention_episodic_days: float = Field(default=0.0, ge=0)
    memory_retention_procedural_days: float = Field(default=0.0, ge=0)


class EmbeddingSettings(BaseSettings):
    """The embedder of long-term memory and its provider (memory_service.embeddings).

    Attributes:
        embedding_model: ``wordllama/l2_supercat_256`` (default, offline, weights in the
            wheel), ``deterministic`` (or ``deterministic/<dims>``: hashed words, for
            tests) or any litellm embedding model (``text-embedding-3-small``,
            ``ollama/nomic-embed-text``, ...).
        embedding_api_base / embedding_api_key: The provider's endpoint and key (litellm).
        embedding_dimensions: Vector size when the provider needs or supports one.
        embedding_batch_size: Texts per provider call.
        embedding_retries: Retries (with backoff) before a provider counts as down (503).
        embedding_timeout_seconds: Per provider call.
        reembed_batch_size: Records re-embedded per step of ``POST /v1/memory/reembed``.
    """

    model_config = _CONFIG

    embedding_model: str = "wordllama/l2_supercat_256"
    embedding_api_base: str | None = None
    embedding_api_key: str | None = None
    embedding_dimensions: int | None = Field(default=None, ge=1, le=8192)
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)
    embedding_retries: int = Field(default=2, ge=0, le=10)
    embedding_timeout_seconds: float = Field(default=30.0, gt=0)
    reembed_batch_size: int = Field(default=256, ge=1, le=10_000)


class VectorIndexSettings(BaseSettings):
    """PostgreSQL: the semantic records' vector index, built in bulk by a background
    builder (``memory_service.longterm.segments``).

    Attributes:
        memory_vector_seal_rows: Semantic records are written unindexed and searched
            exactly until this many have arrived; the builder then builds their HNSW
            index in bulk.
        memory_vector_idle_seconds: Once writes have paused this long, the builder
            indexes the unindexed records and merges the segment indexes into one.
        memory_vector_build_memory_mb: ``maintenance_work_mem`` of those builds (an HNSW
            build is much slower once its graph outgrows it).
    """

    model_config = _CONFIG

    memory_vector_seal_rows: int = Field(default=DEFAULT_SEAL_ROWS, ge=1, le=10_000_000)
    memory_vector_idle_seconds: float = Field(default=DEFAULT_IDLE_SECONDS, gt=0)
    memory_vector_build_memory_mb: int = Field(default=DEFAULT_BUILD_MEMORY_MB, ge=64, le=65536)


class AcceleratorSettings(BaseSettings):
    """The memory service's accelerator switches (docs/architecture.md, "Accelerators").

    Each off falls back to FastAPI's routes.

    Attributes:
        plan_context_fast_path: ``SOORMA_PLAN_CONTEXT_FAST_PATH``: the plan-context hot
            routes in pure ASGI (``memory_service.fastpath``).
        semantic_search_fast_path: ``SOORMA_SEMANTIC_SEARCH_FAST_PATH``:
            ``POST /v1/memory/semantic/search`` in pure ASGI
            (``memory_service.search_fastpath``).
    """

    model_config = _CONFIG

    plan_context_fast_path: bool = True
    semantic_search_fast_path: bool = True


class Settings(
    ServiceSettings,
    MemoryStorageSettings,
    RetentionSettings,
    EmbeddingSettings,
    VectorIndexSettings,
    AcceleratorSettings,
):
    """Memory-service settings: servicekit's shared groups and the service's own
    (:data:`GROUPS`), each read from its flat ``SOORMA_*`` variables."""

    model_config = _CONFIG


GROUPS = (
    MemoryStorageSettings,
    RetentionSettings,
    EmbeddingSettings,
    VectorIndexSettings,
    AcceleratorSettings,
)
