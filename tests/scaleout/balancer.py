"""A round-robin "load balancer" for tests: one httpx client spread over N replicas.

Each request goes to the next replica in turn, as behind a round-robin load balancer,
so a test written for one service (publish, then stream, then ack) has its calls
spread over every replica: publish on one, consume on another, ack on a third.
"""

from __future__ import annotations

import itertools
from collections import Counter

import httpx


class RoundRobin(httpx.AsyncBaseTransport):
    """Sends each request to the next of ``urls`` (``http://host:port`` each)."""

    def __init__(self, urls: list[str], limits: httpx.Limits | None = None) -> None:
        if len(urls) < 2:
            raise ValueError("a balancer needs at least two replicas")
        self.urls = list(urls)
        self._targets = [httpx.URL(u) for u in urls]
        self._next = itertools.cycle(range(len(urls)))
        self._inner = httpx.AsyncHTTPTransport(limits=limits or httpx.Limits())
        self.sent: Counter[int] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = next(self._next)
        self.sent[index] += 1
        target = self._targets[index]
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def balanced_client(
    urls: list[str], *, limits: httpx.Limits | None = None, timeout: float = 15
) -> tuple[httpx.AsyncClient, RoundRobin]:
    """An ``httpx.AsyncClient`` whose requests rotate over ``urls``; and its balancer."""
    balancer = RoundRobin(urls, limits)
    client = httpx.AsyncClient(base_url=urls[0], transport=balancer, timeout=timeout)
    return client, balancer


def replica_urls(client: httpx.AsyncClient) -> list[str]:
    """The replicas behind a client made by :func:`balanced_client`."""
    balancer = client._transport  # httpx keeps the transport it was given here
    assert isinstance(balancer, RoundRobin), "not a balanced client"
    return balancer.urls
