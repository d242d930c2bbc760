"""Helpers shared by the SDK tests (a module with a unique name, importable from tests)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from unittest import mock

from soorma import PlatformContext, PlatformSettings
from testsupport import forkserver
from testsupport.forkserver import ForkedProcess
from testsupport.server import closed_port


def make_context(url: str) -> PlatformContext:
    """A context for the event service at ``url`` that reconnects quickly."""
    # Only the event service: the others point at a port nothing listens on, so a test's
    # outcome never depends on a platform someone runs on the default addresses.
    nowhere = f"http://127.0.0.1:{closed_port()}"
    settings = PlatformSettings(
        event_service_url=url,
        memory_url=nowhere,
        registry_url=nowhere,
        tracker_url=nowhere,
        gateway_url=nowhere,
    )
    context = PlatformContext.from_env(settings=settings)
    # Reconnect quickly in tests that restart the service.
    context.bus.max_backoff = 0.3
    return context


async def eventually(predicate: Callable[[], bool], within: float = 15.0) -> None:
    """Wait until ``predicate()`` holds, failing after ``within`` seconds.

    Polls: the conditions waited on (a reconnect, a stop in progress) are internal
    states with no event to await.
    """
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


class Proc:
    """A subprocess whose merged stdout/stderr is collected line by line."""

    def __init__(self, proc: asyncio.subprocess.Process | ForkedProcess) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._pump_task = asyncio.create_task(self._pump())

    @classmethod
    async def start(
        cls,
        *args: str,
        env: dict[str, str],
        cwd: str | None = None,
        preload: Sequence[str] = forkserver.PRELOAD,
        fresh: bool = False,
    ) -> Proc:
        """Start ``args``; a Python program is forked from a server with ``preload``
        imported (testsupport.forkserver), unless ``fresh`` (a new interpreter)."""
        if not fresh and forkserver.supported(args, env):
            return cls(
                await forkserver.ForkedProcess.start(*args, env=env, cwd=cwd, preload=preload)
            )
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            cwd=cwd,
        )
        return cls(proc)

    async def _pump(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._changed.set()
        self._changed.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def wait_for(self, text: str, within: float = 30.0) -> str:
        """Wait for an output line containing ``text``; fail if the process exits first."""
        async with asyncio.timeout(within):
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                if self._pump_task.done():
                    raise AssertionError(f"process exited before printing {text!r}:\n{self.output}")
                self._changed.clear()
                await self._changed.wait()

    async def wait(self, within: float = 30.0) -> int:
        """Wait for the process to exit (output fully read); return its exit code."""
        async with asyncio.timeout(within):
            code = await self.proc.wait()
            await self._pump_task
        return code

    async def stop(self, sig: int, within: float = 30.0) -> int:
        """Send ``sig`` and wait for exit."""
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        return await self.wait(within)

    async def kill(self) -> None:
        """Make sure the process is gone (test clean-up)."""
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self._pump_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump_task


def subprocess_env(**extra: str) -> dict[str, str]:
    """The test's environment for a child process, minus backend overrides."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SOORMA_DATABASE_URL", "SOORMA_REDIS_URL", "SOORMA_EVENT_BACKEND"}
    }
    env.update(extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


SOORMA = str(Path(sys.executable).with_name("soorma"))


async def soorma_run(
    *targets: str,
    env: dict[str, str],
    within: float = 90.0,
    preload: Sequence[str] = forkserver.PRELOAD,
) -> Proc:
    """``soorma run TARGETS`` as an example's README runs its agents, once they all run.

    Without reload (``--no-reload``): a test changes no file, and a killed test process
    must not leave the supervisor's child (its own session) behind; the agents then run
    in that process, so agents that call a model are forked with ``PRELOAD_AI``.
    """
    proc = await Proc.start(SOORMA, "run", "--no-reload", *targets, env=env, preload=preload)
    await proc.wait_for("soorma run: running", within=within)
    return proc


class CliRun:
    """What :func:`run_cli` saw: the same ``.proc.returncode``, ``.output`` and ``.lines``
    a finished :class:`Proc` offers, so a test reads either the same way."""

    def __init__(self, returncode: int, output: str) -> None:
        self.returncode = returncode
        lines = output.split("\n")
        if lines[-1] == "":  # the last line's newline ends it; it starts no line
            lines.pop()
        self.lines = lines

    @property
    def proc(self) -> CliRun:
        return self

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


# os.environ, the working directory, sys.stdout/stderr and the root logger's handlers
# belong to the whole process: one in-process CLI run at a time.
_cli_lock = threading.Lock()


class _ThreadOnly(logging.Filter):
    def __init__(self, thread: int) -> None:
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread == self.thread


def _cli_in_thread(argv: list[str], env: dict[str, str], cwd: str | None) -> CliRun:
    from soorma import _config
    from soorma.cli import main

    out = io.StringIO()
    # A `soorma` process configures no logging: its warnings reach stderr through
    # logging.lastResort (WARNING and up, the bare message). Here pytest's handlers sit on
    # the root logger instead, so this stands in for lastResort, for this thread's records
    # only (the test's loop, serving the services, runs in another thread meanwhile).
    handler = logging.StreamHandler(out)
    handler.setLevel(logging.WARNING)
    handler.addFilter(_ThreadOnly(threading.get_ident()))
    root = logging.getLogger()
    with _cli_lock:
        # No collection runs while the command does: a task that an earlier test left
        # pending on a loop that is gone logs "Task was destroyed but it is pending!" from
        # the thread that collects it, and that record would pass the filter above as if
        # the command had written it. Paused, not forced first: late in a worker a full
        # collection walks ~750,000 objects (0.6 s), and a command is over in milliseconds.
        handlers, level = list(root.handlers), root.level
        previous_cwd = os.getcwd()
        # Paused only where the finally below turns it back on: left off, every test after
        # this one in the worker would run without a collector.
        collecting = gc.isenabled()
        gc.disable()
        try:
            with (
                mock.patch.dict(os.environ, env, clear=True),
                # Unknown SOORMA_* variables are logged once per process: as in a new one.
                mock.patch.object(_config, "_warned", set()),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(out),
            ):
                root.addHandler(handler)
                if cwd is not None:
                    os.chdir(cwd)
                try:
                    main(argv)
                    code = 0
                except SystemExit as exc:
                    # As the interpreter does: None is 0, an int is itself, anything
                    # else is printed (to stderr) and exits 1.
                    if exc.code is None:
                        code = 0
                    elif isinstance(exc.code, int):
                        code = exc.code
                    else:
                        print(exc.code, file=sys.stderr)
                        code = 1
                except Exception:
                    # An uncaught exception: the traceback a process would print, exit 1.
                    traceback.print_exc()
                    code = 1
        finally:
            os.chdir(previous_cwd)
            root.removeHandler(handler)
            if collecting:
                gc.enable()
            changed = (list(root.handlers), root.level) != (handlers, level)
            if changed:  # put it back for the tests after this one, then say so
                seen = f"{root.handlers}, level {root.level}"
                root.handlers[:] = handlers
                root.setLevel(level)
    assert not changed, f"soorma {argv} configured the root logger: {seen}"
    return CliRun(code, out.getvalue())


async def run_cli(
    *argv: str, env: dict[str, str], cwd: str | None = None, within: float = 60.0
) -> CliRun:
    """``soorma ARGV`` in this process, as a short-lived ``soorma`` process would run it.

    ``soorma.cli.main`` runs in a thread (the test's event loop keeps serving the
    services it calls) with ``os.environ`` replaced by ``env`` and the working directory
    ``cwd`` for the duration, stdout and stderr merged into one buffer, and its exit code
    taken from ``SystemExit``. Each command's ``asyncio.run`` makes and closes its own
    loop in that thread. For what is about the process itself (signals, reload, children,
    buffering, the installed entry point), start a real one with :class:`Proc`.
    """
    async with asyncio.timeout(within):
        return await asyncio.to_thread(_cli_in_thread, list(argv), env, cwd)
