"""Databases and key spaces for fixtures wider than one test (a module's shared services),
where the per-test ``postgres_url``/``redis_prefix`` fixtures cannot be used."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def fresh_postgres(server_url: str) -> AsyncIterator[str]:
    """A new, empty PostgreSQL database on ``server_url``, dropped afterwards."""
    import asyncpg

    plain = server_url.replace("postgresql+asyncpg://", "postgresql://")
    name = f"soorma_t_shared_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(plain)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield f"{server_url.rpartition('/')[0]}/{name}"
    finally:
        admin = await asyncpg.connect(plain)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@contextlib.asynccontextmanager
async def redis_key_space(redis_url: str) -> AsyncIterator[str]:
    """A key prefix nothing else uses; its keys are deleted afterwards."""
    import redis.asyncio as redis

    prefix = f"soorma-test-shared-{uuid.uuid4().hex[:12]}"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(redis_url)
        try:
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()
