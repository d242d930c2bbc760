"""``soorma run``: a project's agents in one process, restarted when their code changes.

Targets are Python files (``agents/*.py``), folders (every ``*.py`` inside) or module
names (``myproject.agents``, ``myproject.agents.*``). Each is imported (not run as
``__main__``, so its ``agent.run()`` guard stays off) and every :class:`Agent` it
defines at module level is started; Ctrl-C stops them all (a second: at once).

With reload (the default) a supervisor runs the agents in a child process and
restarts it when a watched file changes: the targets' files and the ``*.py`` files
beside them, which they may import.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import importlib
import importlib.util
import logging
import os
import pkgutil
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import httpx

from soorma.agents.base import Agent
from soorma.settings import PlatformSettings

# How often the supervisor looks at the watched files' modification times.
POLL_SECONDS = 0.5
# How long a child asked to stop (for a change) gets before it is told to stop at once.
RESTART_GRACE_SECONDS = 2.0


class RunError(Exception):
    """A target that cannot be found, imported, or defines no agent."""


def _module_from_file(path: Path) -> ModuleType:
    # Siblings import each other by bare name (``from approval import ...``).
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"soorma_run_{abs(hash(str(path.resolve())))}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RunError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _modules_from_name(pattern: str) -> list[ModuleType]:
    if not any(ch in pattern for ch in "*?["):
        return [importlib.import_module(pattern)]
    package_name, _, leaf = pattern.rpartition(".")
    package = importlib.import_module(package_name)
    found = [
        importlib.import_module(f"{package_name}.{info.name}")
        for info in pkgutil.iter_modules(getattr(package, "__path__", []))
        if fnmatch.fnmatch(info.name, leaf)
    ]
    if not found:
        raise RunError(f"no module of {package_name} matches {leaf!r}")
    return found


def target_files(targets: Sequence[str]) -> list[Path]:
    """The Python files named by ``targets`` (files, folders, or none for module names)."""
    files: list[Path] = []
    for target in targets:
        path = Path(target)
        if path.is_dir():
            files.extend(sorted(p for p in path.glob("*.py") if not p.name.startswith("_")))
        elif path.suffix == ".py":
            if not path.is_file():
                raise RunError(f"no such file: {target}")
            files.append(path)
    return files


def load_agents(targets: Sequence[str]) -> list[tuple[str, Agent]]:
    """Import ``targets`` and return every module-level agent, with where it was found."""
    found: list[tuple[str, Agent]] = []
    modules: list[tuple[str, ModuleType]] = []
    for target in targets:
        path = Path(target)
        if path.is_dir() or path.suffix == ".py":
            modules.extend((str(p), _module_from_file(p)) for p in target_files([target]))
        else:
            try:
                modules.extend((m.__name__, m) for m in _modules_from_name(target))
            except ImportError as exc:
                raise RunError(f"cannot import {target}: {exc}") from None
    seen: set[int] = set()
    for where, module in modules:
        for value in vars(module).values():
            # Once each, also when two names hold it (a loop variable, an alias).
            if isinstance(value, Agent) and id(value) not in seen:
                seen.add(id(value))
                found.append((where, value))
    if not found:
        raise RunError(f"no agent (Agent, Tool, Worker, Planner) defined in {' '.join(targets)}")
    return found


def watched_files(targets: Sequence[str]) -> list[Path]:
    """The files whose change restarts the agents: each target's folder's ``*.py``."""
    folders: set[Path] = set()
    for target in targets:
        path = Path(target)
        if path.is_dir():
            folders.add(path)
        elif path.suffix == ".py":
            folders.add(path.parent)
        else:
            spec = importlib.util.find_spec(target.rpartition(".")[0] or target)
            if spec is not None and spec.origin:
                folders.add(Path(spec.origin).parent)
    return sorted(p for folder in folders for p in folder.glob("*.py"))


async def use_discovery() -> None:
    """With ``SOORMA_URL`` set, the agents connect where the platform's discovery
    document says (their ``from_env()`` reads the per-service variables set here)."""
    async with httpx.AsyncClient() as http:
        settings = await PlatformSettings.discover(http)
    if not settings.platform_url:
        return
    for variable, url in settings.service_variables().items():
        os.environ.setdefault(variable, url)


async def run_agents(agents: Sequence[tuple[str, Agent]], *, out: TextIO) -> int:
    """Start ``agents`` together, serve until SIGINT/SIGTERM, then stop them all."""
    await use_discovery()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():  # the second Ctrl-C: no more waiting for handlers
            for _, agent in agents:
                agent._stop_now.set()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        starting: asyncio.Future[list[None]] = asyncio.gather(
            *(agent.start() for _, agent in agents)
        )
        stopped: asyncio.Future[object] = asyncio.ensure_future(stop.wait())
        first: list[asyncio.Future[Any]] = [starting, stopped]
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()
            names = ", ".join(f"{agent.name} ({where})" for where, agent in agents)
            print(f"soorma run: running {names} (Ctrl-C to stop)", file=out, flush=True)
            # Until a signal, or until an agent's stream fails for good.
            failing: list[asyncio.Future[object]] = [
                asyncio.ensure_future(agent.wait()) for _, agent in agents
            ]
            await asyncio.wait([stopped, *failing], return_when=asyncio.FIRST_COMPLETED)
            for task in failing:
                task.cancel()
        else:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
        stopped.cancel()
    finally:
        await asyncio.gather(*(agent.stop() for _, agent in agents), return_exceptions=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0


def _mtimes(files: Iterable[Path]) -> dict[Path, float]:
    times: dict[Path, float] = {}
    for path in files:
        with contextlib.suppress(OSError):
            times[path] = path.stat().st_mtime
    return times


class _Interrupts:
    """Ctrl-C and SIGTERM counted, never raised: the supervisor passes each one on.

    A ``KeyboardInterrupt`` can surface at any bytecode, even from inside the
    ``os.kill`` that passed the previous one on, and then escape the code meant to
    handle it (the agents' process was left running). Here the handlers only count;
    the main loop does the rest. A byte on the wakeup pipe (signals and the child's
    exit, SIGCHLD) ends a :meth:`pause` at once.
    """

    def __init__(self) -> None:
        self.count = 0
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._wakeup = signal.set_wakeup_fd(self._write)
        self._handlers = {
            sig: signal.signal(sig, handler)
            for sig, handler in (
                (signal.SIGINT, self._interrupted),
                (signal.SIGTERM, self._interrupted),  # never orphans the agents
                (signal.SIGCHLD, self._child_exited),
            )
        }

    def _interrupted(self, signum: int, frame: object) -> None:
        self.count += 1

    def _child_exited(self, signum: int, frame: object) -> None:
        pass  # its byte on the wakeup pipe is the point

    def pause(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a signal or the child's exit ends it early."""
        select.select([self._read], [], [], seconds)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 512):
                pass

    def close(self) -> None:
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._wakeup)
        os.close(self._read)
        os.close(self._write)


def supervise(targets: Sequence[str], *, out: TextIO) -> int:
    """Run the agents in a child process; restart it whenever a watched file changes."""
    command = [sys.executable, "-c", "from soorma.cli import main; main()", "run", "--no-reload"]
    watched = watched_files(targets)
    print(f"soorma run: watching {len(watched)} file(s) for changes", file=out, flush=True)
    interrupts = _Interrupts()
    try:
        while not interrupts.count:
            # Its own session: a terminal's Ctrl-C reaches the supervisor only, which
            # passes each one on (the second one stops the agents at once).
            child = subprocess.Popen([*command, *targets], start_new_session=True)
            before = _mtimes(watched_files(targets))
            changed: list[Path] = []
            while not changed and not interrupts.count:
                interrupts.pause(POLL_SECONDS)
                now = _mtimes(watched_files(targets))
                # A child that exited (e.g. a syntax error) waits here for the fix.
                changed = sorted(
                    p for p in now.keys() | before.keys() if now.get(p) != before.get(p)
                )
            if not interrupts.count:
                names = ", ".join(p.name for p in changed)
                print(f"soorma run: {names} changed; restarting", file=out, flush=True)
            _stop(child, interrupts, restart=not interrupts.count, out=out)
        return 0
    finally:
        interrupts.close()


def _stop(
    child: subprocess.Popen[bytes], interrupts: _Interrupts, *, restart: bool, out: TextIO
) -> None:
    """Ask ``child`` to stop and wait until it has.

    Each Ctrl-C (or SIGTERM) is passed on, up to the two the agents act on (the second
    stops them at once). A restart asks once itself and, after
    :data:`RESTART_GRACE_SECONDS`, once more: a change waits for no handler.
    """
    seen = interrupts.count
    grace_ends = time.monotonic() + RESTART_GRACE_SECONDS
    sent = 0
    while child.poll() is None:
        if restart:
            late = time.monotonic() >= grace_ends
            wanted = 1 + int(late) + interrupts.count - seen
        else:
            wanted = interrupts.count
        while sent < min(wanted, 2):
            # SIGINT, then SIGTERM: two of one kind sent close together may arrive as
            # one (POSIX keeps one pending of each); the agents count either as a Ctrl-C.
            child.send_signal(signal.SIGTERM if sent else signal.SIGINT)
            sent += 1
            if not restart and sent == 1:
                print("soorma run: stopping the agents", file=out, flush=True)
        left = grace_ends - time.monotonic()
        interrupts.pause(left if restart and left > 0 else POLL_SECONDS)


def configure_logging() -> None:
    """Agents' lines (ready, lost, reconnected) at INFO, without httpx's line per
    request or litellm's chatter."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in ("httpx", "httpcore", "LiteLLM"):
        logging.getLogger(name).setLevel(logging.WARNING)


__all__ = [
    "RunError",
    "configure_logging",
    "load_agents",
    "run_agents",
    "supervise",
    "target_files",
    "watched_files",
]
