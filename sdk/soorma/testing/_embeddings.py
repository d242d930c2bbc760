"""The deterministic embedder tests use: no model, no network, same vector every time.

It is the memory service's ``deterministic/<dimensions>`` embedding model (the harness
starts the memory service with it), so a test can also precompute the exact vectors the service
stores, e.g. to send ``embedding=`` or to rank expected hits itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from soorma_common.knowledge import deterministic_embedding

# The memory service's name for it: ``deterministic/<dimensions>``.
DETERMINISTIC_MODEL = "deterministic"
DEFAULT_DIMENSIONS = 256


@dataclass(frozen=True, slots=True)
class DeterministicEmbedder:
    """Hashed bag-of-words vectors: texts sharing words are similar, others orthogonal.

    Attributes:
        dimensions: Vector length (the memory service's ``embedding_dimensions``).
    """

    dimensions: int = DEFAULT_DIMENSIONS

    @property
    def model(self) -> str:
        """The memory service's ``embedding_model`` setting for these vectors."""
        return f"{DETERMINISTIC_MODEL}/{self.dimensions}"

    def embed(self, text: str) -> list[float]:
        """The unit vector of ``text``."""
        return deterministic_embedding(text, self.dimensions)

    def embed_many(self, texts: Iterable[str]) -> list[list[float]]:
        """The vectors of ``texts``, in order."""
        return [self.embed(t) for t in texts]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two texts (their vectors are unit length)."""
        return cosine(self.embed(a), self.embed(b))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0.0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


__all__ = ["DEFAULT_DIMENSIONS", "DETERMINISTIC_MODEL", "DeterministicEmbedder", "cosine"]
