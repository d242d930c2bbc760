"""Text to vectors for long-term memory: one small interface, three implementations.

- :class:`DeterministicEmbedder` (``SOORMA_EMBEDDING_MODEL=deterministic``): hashed bag of
  words from :func:`soorma_common.knowledge.deterministic_embedding`; tests and demos.
- :class:`WordLlamaEmbedder` (the default, ``wordllama/l2_supercat_256``): a static
  word-embedding model whose weights ship inside the ``wordllama`` wheel; loaded from the
  package's own files, never from the network.
- :class:`LiteLLMEmbedder` (any other name): ``litellm.aembedding`` for any provider
  (``text-embedding-3-small``, ``ollama/nomic-embed-text``, an OpenAI-compatible
  ``api_base``), batched, retried with backoff; a provider that stays down raises
  :class:`~soorma_common.errors.EmbeddingUnavailable` naming it. Our retries are the only
  ones: OpenAI and OpenAI-compatible endpoints get a client that makes one attempt per call.

Every vector is stored with the embedder's ``model`` name, so a model change is visible
and ``soorma memory reembed`` can move old records over.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from soorma_common.errors import EmbeddingMismatch, EmbeddingUnavailable, ValidationFailed
from soorma_common.knowledge import deterministic_embedding

log = logging.getLogger("memory_service.embeddings")

DETERMINISTIC = "deterministic"
WORDLLAMA_DEFAULT = "wordllama/l2_supercat_256"
DEFAULT_DETERMINISTIC_DIMENSIONS = 256


class Embedder(Protocol):
    """Turns texts into unit-length-comparable vectors of ``dimensions`` floats."""

    @property
    def model(self) -> str: ...

    @property
    def provider(self) -> str: ...

    async def dimensions(self) -> int:
        """The vector size (a provider without a configured size is asked once)."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            EmbeddingUnavailable: the provider did not answer (after retries).
            EmbeddingMismatch: the provider answered vectors of an unexpected size.
        """
        ...

    async def close(self) -> None:
        """Release what the embedder holds open (a provider's connections)."""
        ...


class DeterministicEmbedder:
    """Hashed bag of words: texts sharing words are similar. No model, no I/O."""

    provider = "deterministic"

    def __init__(self, dimensions: int = DEFAULT_DETERMINISTIC_DIMENSIONS) -> None:
        self._dims = dimensions
        self.model = f"{DETERMINISTIC}/{dimensions}"

    async def dimensions(self) -> int:
        return self._dims

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [deterministic_embedding(text, self._dims) for text in texts]

    async def close(self) -> None:
        """Nothing held open."""


class WordLlamaEmbedder:
    """WordLlama's ``l2_supercat`` token embeddings (256 dimensions), mean-pooled.

    The wheel carries the weights (``wordllama/weights/*.safetensors``) and the tokenizer
    (``wordllama/tokenizers/*.json``); wordllama's own loader looks for the tokenizer
    under another folder name and then downloads it, so the files are opened here directly.
    The model loads on first use (about 3 s), in a worker thread, once.
    """

    provider = "wordllama"

    def __init__(self, model: str = WORDLLAMA_DEFAULT) -> None:
        self.model = model
        self._config = model.split("/", 1)[1] if "/" in model else model
        self._inference: Any = None
        self._lock = asyncio.Lock()

    def _load(self) -> Any:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        root = Path(wordllama.__file__).parent
        name, _, dims = self._config.rpartition("_")
        weights = root / "weights" / f"{self._config}.safetensors"
        tokenizer = root / "tokenizers" / f"{name}_tokenizer_config.json"
        if not weights.exists() or not tokenizer.exists() or not dims.isdigit():
            raise EmbeddingUnavailable(
                f"embedding model {self.model!r}: the wordllama wheel has no weights "
                f"{weights.name!r}; set SOORMA_EMBEDDING_MODEL={WORDLLAMA_DEFAULT}",
                details={"provider": self.provider, "model": self.model},
            )
        with safe_open(str(weights), framework="np", device="cpu") as f:
            matrix = f.get_tensor("embedding.weight")
        return WordLlamaInference(matrix, Tokenizer.from_file(str(tokenizer)))

    async def _model(self) -> Any:
        if self._inference is None:
            async with self._lock:
                if self._inference is None:
                    self._inference = await asyncio.to_thread(self._load)
        return self._inference

    async def dimensions(self) -> int:
        return int((await self._model()).embedding.shape[1])

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        model = await self._model()
        vectors = await asyncio.to_thread(model.embed, list(texts), norm=True)
        return [[float(x) for x in row] for row in vectors]

    async def close(self) -> None:
        """Nothing held open."""


class LiteLLMEmbedder:
    """Any provider through ``litellm.aembedding``, in batches, retried with backoff.

    litellm reads ``max_retries=0`` as "use the default" (``max_retries or 2``) and sets
    that on any OpenAI client it is given, so each of our attempts would hide three of the
    SDK's, each with its own backoff. The ``openai`` provider (OpenAI itself and every
    OpenAI-compatible ``api_base``) therefore gets a client of ours that cannot retry.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        retries: int = 2,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = 30.0,
    ) -> None:
        self.model = model
        self.provider = model.split("/", 1)[0] if "/" in model else "openai"
        self._api_base = api_base
        self._api_key = api_key
        self._dims = dimensions
        self._batch_size = batch_size
        self._retries = retries
        self._backoff = backoff_seconds
        self._timeout = timeout_seconds
        # The single-attempt OpenAI client (_client), made on first use and kept: its
        # connections and TLS context serve every later call.
        self._openai: Any | None = None

    def _where(self) -> str:
        return f"{self.model!r} at {self._api_base}" if self._api_base else repr(self.model)

    async def dimensions(self) -> int:
        if self._dims is None:
            client = await self._client()
            self._dims = len((await self._call(["dimension probe"], client))[0])
        return self._dims

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        batches = [
            list(texts[i : i + self._batch_size]) for i in range(0, len(texts), self._batch_size)
        ]
        vectors: list[list[float]] = []
        client = await self._client()
        for batch in batches:
            vectors.extend(await self._call(batch, client))
        if vectors:
            expected = self._dims if self._dims is not None else len(vectors[0])
            if any(len(v) != expected for v in vectors):
                raise EmbeddingMismatch(
                    f"embedding model {self.model!r} answered vectors of "
                    f"{len(vectors[0])} dimensions, expected {expected}; check "
                    "SOORMA_EMBEDDING_DIMENSIONS, then run `soorma memory reembed`",
                    details={"model": self.model, "dimensions": expected},
                )
            self._dims = expected
        return vectors

    async def close(self) -> None:
        client, self._openai = self._openai, None
        if client is not None:
            await client.close()

    async def _client(self) -> Any:
        """The single-attempt OpenAI client (``None`` for providers litellm reaches
        another way), made on first use and kept until :meth:`close`."""
        if self._openai is not None:
            return self._openai
        import litellm

        try:
            route = litellm.get_llm_provider(model=self.model, api_base=self._api_base)[1]
        except Exception:  # an unknown provider: litellm's own call reports it
            route = None
        if route != "openai":
            return None
        # Where litellm would send an openai call without a client of ours.
        base_url = (
            self._api_base
            or litellm.api_base
            or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_BASE")
        )
        api_key = (
            self._api_key
            or litellm.api_key
            or litellm.openai_key
            or os.environ.get("OPENAI_API_KEY")
        )
        try:
            self._openai = _single_attempt_openai_client(base_url, api_key, self._timeout)
        except Exception as exc:  # no key anywhere: the provider cannot be called
            raise self._unavailable(exc) from exc
        return self._openai

    async def _call(self, batch: list[str], client: Any) -> list[list[float]]:
        import litellm

        kwargs: dict[str, Any] = {"model": self.model, "input": batch, "timeout": self._timeout}
        if self._api_base:
            kwargs["api_base"] = self._api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        if client is not None:
            kwargs["client"] = client
        if self._dims is not None and self.model.startswith(("text-embedding-3", "openai/")):
            kwargs["dimensions"] = self._dims
        last: Exception | None = None
        for attempt in range(self._retries + 1):
            try:
                response = await litellm.aembedding(**kwargs)
                data = sorted(response.data, key=lambda item: _get(item, "index"))
                return [list(map(float, _get(item, "embedding"))) for item in data]
            except Exception as exc:  # any provider failure: network, auth, rate limit
                last = exc
                log.warning(
                    "embedding call failed",
                    extra={"model": self.model, "attempt": attempt + 1, "error": str(exc)[:200]},
                )
                if attempt < self._retries:
                    await asyncio.sleep(self._backoff * 2**attempt)
        raise self._unavailable(last)

    def _unavailable(self, cause: Exception | None) -> EmbeddingUnavailable:
        return EmbeddingUnavailable(
            f"embedding provider {self.provider!r} (model {self._where()}) is unavailable: "
            f"{type(cause).__name__}: {str(cause)[:300]}; nothing was stored",
            details={"provider": self.provider, "model": self.model},
        )


def _single_attempt_openai_client(base_url: str | None, api_key: str | None, timeout: float) -> Any:
    """An ``openai.AsyncOpenAI`` whose ``max_retries`` stays 0 whatever litellm sets."""
    return _single_attempt_openai_class()(base_url=base_url, api_key=api_key, timeout=timeout)


@functools.cache
def _single_attempt_openai_class() -> type:
    import openai  # a dependency of litellm; imported when first needed, like litellm

    class SingleAttemptOpenAI(openai.AsyncOpenAI):
        @property  # type: ignore[override]
        def max_retries(self) -> int:
            return 0

        @max_retries.setter
        def max_retries(self, value: int) -> None:
            pass  # litellm writes its default (2) here before every call

    return SingleAttemptOpenAI


def _get(item: Any, key: str) -> Any:
    return item[key] if isinstance(item, dict) else getattr(item, key)


def make_embedder(
    model: str,
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    dimensions: int | None = None,
    batch_size: int = 64,
    retries: int = 2,
    timeout_seconds: float = 30.0,
) -> Embedder:
    """The embedder a model name selects (see the module docstring)."""
    if model == DETERMINISTIC or model.startswith(f"{DETERMINISTIC}/"):
        tail = model.partition("/")[2]
        dims = int(tail) if tail.isdigit() else dimensions or DEFAULT_DETERMINISTIC_DIMENSIONS
        return DeterministicEmbedder(dims)
    if model.startswith("wordllama/"):
        return WordLlamaEmbedder(model)
    return LiteLLMEmbedder(
        model,
        api_base=api_base,
        api_key=api_key,
        dimensions=dimensions,
        batch_size=batch_size,
        retries=retries,
        timeout_seconds=timeout_seconds,
    )


def check_vector(vector: Sequence[float], *, model: str, dimensions: int) -> None:
    """422 when a precomputed vector does not fit the active model."""
    if len(vector) != dimensions:
        raise ValidationFailed(
            f"embedding has {len(vector)} dimensions but the active embedding model "
            f"{model!r} has {dimensions}; send vectors from that model or omit `embedding`",
            details=[{"field": "embedding", "model": model, "dimensions": dimensions}],
        )
    # A sum is finite when every value is (one C loop); only then can the walk be skipped.
    if not math.isfinite(sum(vector)) and not all(math.isfinite(x) for x in vector):
        raise ValidationFailed("embedding values must be finite numbers")
