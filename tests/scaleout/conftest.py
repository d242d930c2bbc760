"""Scale-out fixtures: every service test here talks to two replicas at once.

The ``service`` fixture of the event-service contract tests (tests/event_service) is
replaced by two event-service apps, each served by its own uvicorn and holding its own
Redis clients, on one shared Redis; their client is a round-robin balancer
(:mod:`balancer`), so consecutive calls of one test land on different replicas.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

# The contract tests and their helpers are reused, not copied.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "event_service"))

from balancer import balanced_client
from event_stack import Service, make_settings
from test_event_recovery import Timed

from event_service import create_app
from event_service.settings import Settings
from testsupport.server import serve


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis)])
def settings(request: pytest.FixtureRequest) -> Settings:
    """Settings shared by both replicas: one Redis, one key prefix."""
    return make_settings(request.param, request)


@pytest_asyncio.fixture
async def service(settings: Settings) -> AsyncIterator[Service]:
    """Two event-service replicas behind a round-robin balancer."""
    async with serve(create_app(settings)) as one, serve(create_app(settings)) as two:
        client, balancer = balanced_client([one.url, two.url])
        async with client:
            yield Service(one, client, settings)
        # Guard against a balancer that silently sends everything to one replica.
        if sum(balancer.sent.values()) > 1:
            assert min(balancer.sent[0], balancer.sent[1]) > 0, balancer.sent


@pytest.fixture
def timed(service: Service) -> Timed:
    """The replicas in real time, for the recovery tests reused from tests/event_service
    (which run there on a manual clock as well): Redis keeps its own time."""
    return Timed(service)
