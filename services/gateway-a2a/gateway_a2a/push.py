"""Push notifications: a2a-sdk's sender with an operator allow-list and retries.

A target host must be listed in ``SOORMA_GATEWAY_PUSH_ALLOW``. ``*`` in the list allows
any host that resolves only to public addresses (a2a-sdk's own check); private, loopback
and link-local addresses are refused unless their host is listed by name (no SSRF).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from urllib.parse import urlsplit

import httpx
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.push_url_validator import validate_push_notification_url

from gateway_a2a.settings import Settings

logger = logging.getLogger(__name__)


class PushPolicy:
    """Which push URLs the operator allows."""

    def __init__(self, allow: list[str]) -> None:
        self.hosts = {h for h in allow if h != "*"}
        self.any_public = "*" in allow

    async def __call__(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        host = parts.hostname.lower()
        hostport = f"{host}:{parts.port}" if parts.port else host
        if host in self.hosts or hostport in self.hosts:
            return True
        return self.any_public and await validate_push_notification_url(url)


class DispatchConfigCache:
    """The push configs of a task for dispatch, read at most once per ``ttl`` seconds.

    Every update of every task would otherwise cost a query (three per short task, most
    of them finding nothing). Configs created or deleted through this replica are seen
    at once (:meth:`forget`); through another replica within ``ttl``.
    """

    def __init__(self, store: PushNotificationConfigStore, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        self._cache: dict[str, tuple[float, list[TaskPushNotificationConfig]]] = {}

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        now = time.monotonic()
        hit = self._cache.get(task_id)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        configs = list(await self.store.get_info_for_dispatch(task_id) or [])
        if len(self._cache) > 10_000:
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < self.ttl}
        self._cache[task_id] = (now, configs)
        return configs

    def forget(self, task_id: str) -> None:
        self._cache.pop(task_id, None)

    def none_yet(self, task_id: str) -> None:
        """A task just created without a push config has none (for ``ttl``, as any read)."""
        self._cache[task_id] = (time.monotonic(), [])


class RetryingPushSender(BasePushNotificationSender):
    """Deliver each notification with retries and exponential backoff."""

    def __init__(
        self, http: httpx.AsyncClient, store: PushNotificationConfigStore, settings: Settings
    ) -> None:
        self.configs = DispatchConfigCache(store, settings.gateway_push_config_ttl_seconds)
        super().__init__(
            http,
            self.configs,  # type: ignore[arg-type]  # only get_info_for_dispatch is used
            push_url_validator=PushPolicy(settings.gateway_push_allow),
        )
        self.attempts = settings.gateway_push_attempts
        self.backoff = settings.gateway_push_backoff_seconds
        self._chains: dict[str, asyncio.Task[None]] = {}

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Queue the delivery behind the task's earlier ones and return at once.

        A slow or failing receiver (retries with backoff) must not hold up the task's
        own updates; notifications of one task still leave in order.
        """
        previous = self._chains.get(task_id)

        async def deliver() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous
            await BasePushNotificationSender.send_notification(self, task_id, event)

        chain = asyncio.create_task(deliver(), name=f"push {task_id}")
        self._chains[task_id] = chain

        def _forget(done: asyncio.Task[None]) -> None:
            if self._chains.get(task_id) is done:
                del self._chains[task_id]

        chain.add_done_callback(_forget)

    async def drain(self) -> None:
        """Wait for the deliveries in flight (shutdown)."""
        while self._chains:
            await asyncio.gather(*self._chains.values(), return_exceptions=True)

    async def _dispatch_notification(
        self, event: PushNotificationEvent, push_info: TaskPushNotificationConfig, task_id: str
    ) -> bool:
        for attempt in range(self.attempts):
            if await super()._dispatch_notification(event, push_info, task_id):
                return True
            if attempt + 1 < self.attempts:
                await asyncio.sleep(self.backoff * 2**attempt)
        logger.warning(
            "push to %s for task %s failed %d times", push_info.url, task_id, self.attempts
        )
        return False
