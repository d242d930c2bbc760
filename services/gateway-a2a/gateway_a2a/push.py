"""Push notifications: a2a-sdk's sender with the gateway's URL policy and retries.

Which targets are allowed is :mod:`gateway_a2a.pushpolicy`; it runs when a config is
created and again before each delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import httpx
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types.a2a_pb2 import TaskPushNotificationConfig

from gateway_a2a.pushpolicy import PushPolicy
from gateway_a2a.settings import Settings

logger = logging.getLogger(__name__)


def policy_for(settings: Settings) -> PushPolicy:
    """The push-URL policy of these settings (a default list says it is the default)."""
    default = settings.gateway_push_allow is None
    origin = f"the default in {settings.auth_mode} mode" if default else ""
    return PushPolicy(settings.push_allow_list, origin=origin)


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
            push_url_validator=policy_for(settings),
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
