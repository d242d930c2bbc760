"""soorma.memory's public names, and the long-term views every memory client has."""

import httpx
import pytest

import soorma.memory
from soorma import MemoryClient
from soorma.client import Identity, verified_tls
from soorma.memory import EpisodicMemory, KnowledgeMemory, ProceduralMemory


def test_memory_module_exports_are_pinned():
    assert sorted(soorma.memory.__all__) == [
        "DEFAULT_LIST_LIMIT",
        "DEFAULT_UPDATE_RETRIES",
        "EpisodicMemory",
        "KnowledgeMemory",
        "MemoryClient",
        "ProceduralMemory",
    ]


@pytest.mark.asyncio
async def test_memory_client_has_one_view_per_long_term_memory_type():
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        client = MemoryClient(base_url="http://memory", http=http, identity=Identity(tenant_id="t"))
        assert isinstance(client.knowledge, KnowledgeMemory)
        assert isinstance(client.episodes, EpisodicMemory)
        assert isinstance(client.procedures, ProceduralMemory)
        for name in ("forget_user", "embedding_info", "reembed", "reembed_status"):
            assert callable(getattr(client, name)), name
