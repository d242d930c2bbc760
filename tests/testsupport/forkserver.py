"""Start Python programs by fork from a process that has already done the imports.

An agent process spends most of its CPU importing: the SDK and its libraries take half a
second, litellm four. The tests and the chaos run start well over a hundred such
processes; this server imports once and forks a child per program. A child is an
ordinary, separate process (its own pid and memory, killed by SIGKILL like any other)
whose program starts as ``python SCRIPT`` / ``python -m MODULE`` / ``python -c CODE``
would, with the caller's argv, environment, working directory and standard streams.

Only what is imported before the fork is shared: third-party libraries and the SDK,
which read no environment at import. Interpreter options other than ``-u`` (and the
``PYTHON*`` variables that set them at start-up) cannot change after start, so
:func:`supported` sends those commands to an ordinary exec.

Protocol, over a Unix socket, one connection per child: the caller sends a length-
prefixed JSON request with the child's stdin, stdout and stderr as SCM_RIGHTS; the
server answers the pid, then, when the child exits, its wait status.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testsupport.forkserver_process import FRAME

SERVER = Path(__file__).with_name("forkserver_process.py")

# The libraries every agent, CLI and service process of this repository imports.
PRELOAD = (
    "httpx",
    "pydantic",
    "pydantic_settings",
    "fastapi",
    "uvicorn",
    "sqlalchemy.ext.asyncio",
    "redis.asyncio",
    "orjson",
    "opentelemetry.sdk.trace",
    "soorma",
    "soorma.cli",
    "soorma.ai",
    "jsonschema",  # the SDK's payload validation imports it on first use
)
# litellm (about four seconds of CPU), for the programs that call a model, and what
# litellm imports on its first completion (its proxy's file-id helpers among them: 1.3 s
# of CPU in each forked planner). A name after "?" is left out where this litellm has no
# such module.
PRELOAD_AI = (
    *PRELOAD,
    "litellm",
    "?litellm.proxy.openai_files_endpoints.common_utils",
    "?litellm.proxy.spend_tracking.savings",
    "?litellm._service_logger",
)

# Interpreter settings fixed at start-up: a child whose environment sets them differently
# from the server's is started the ordinary way.
_STARTUP_VARIABLES = (
    "PYTHONHASHSEED",
    "PYTHONOPTIMIZE",
    "PYTHONWARNINGS",
    "PYTHONDEVMODE",
    "PYTHONSAFEPATH",
    "PYTHONNOUSERSITE",
    "PYTHONHOME",
    "PYTHONPYCACHEPREFIX",
    "PYTHONMALLOC",
    "PYTHONFAULTHANDLER",
    "PYTHONTRACEMALLOC",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONUTF8",
)


def _is_python(path: str) -> bool:
    return os.path.abspath(path) == os.path.abspath(sys.executable)


def _is_console_script(path: str) -> bool:
    """A script of this environment's bin folder run by this interpreter (``soorma``)."""
    try:
        if Path(path).resolve().parent != Path(sys.executable).absolute().parent.resolve():
            return False
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and _is_python(first[2:].decode().strip())


def parse(argv: Sequence[str]) -> dict[str, Any] | None:
    """What ``argv`` runs (``{"script"|"module"|"code": ..., "args": [...], "unbuffered":
    bool}``), or None when it is not a Python program this server can start."""
    if not argv:
        return None
    if _is_console_script(argv[0]):
        return {"script": os.path.abspath(argv[0]), "args": list(argv[1:]), "unbuffered": False}
    if not _is_python(argv[0]):
        return None
    rest, unbuffered = list(argv[1:]), False
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag == "-u":
            unbuffered = True
        elif flag in ("-m", "-c") and rest:
            key = "module" if flag == "-m" else "code"
            return {key: rest[0], "args": rest[1:], "unbuffered": unbuffered}
        else:
            return None
    if not rest:
        return None
    return {"script": os.path.abspath(rest[0]), "args": rest[1:], "unbuffered": unbuffered}


def supported(argv: Sequence[str], env: dict[str, str] | None) -> bool:
    """Whether the server can start ``argv`` with ``env`` as an exec would."""
    if parse(argv) is None:
        return False
    child = os.environ if env is None else env
    return all(child.get(k) == os.environ.get(k) for k in _STARTUP_VARIABLES)


class ForkServer:
    """A server process with ``preload`` imported; :meth:`spawn` forks a program from it."""

    def __init__(self, preload: Sequence[str] = PRELOAD) -> None:
        self.preload = tuple(preload)
        self._dir = tempfile.mkdtemp(prefix="soorma-fork-")
        self.path = os.path.join(self._dir, "s")
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._proc = subprocess.Popen(
                [sys.executable, str(SERVER), self.path, *self.preload],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline()
            if line.strip() != b"ready":
                raise RuntimeError(f"fork server did not start: {line!r}")

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None,
        cwd: str | None,
        fds: tuple[int, int, int],
        new_session: bool = False,
    ) -> tuple[int, socket.socket]:
        """Fork ``argv`` with ``fds`` as its stdin, stdout, stderr: ``(pid, connection)``;
        the connection later carries the child's wait status (:func:`read_status`)."""
        program = parse(argv)
        if program is None:
            raise ValueError(f"not a Python program the fork server can start: {argv!r}")
        self._ensure()
        request = {
            **program,
            "env": dict(os.environ if env is None else env),
            "cwd": os.path.abspath(cwd or os.getcwd()),
            "new_session": new_session,
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            data = json.dumps(request).encode()
            socket.send_fds(conn, [FRAME.pack(len(data)) + data], list(fds))
            pid = int(_read_line(conn))
        except BaseException:
            conn.close()
            raise
        return pid, conn

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(64)
        if not chunk:
            raise ConnectionError("fork server closed the connection")
        data += chunk
    return data


def _exit_code(line: bytes) -> int:
    """A reported wait status as a return code (``-N`` for signal N)."""
    return os.waitstatus_to_exitcode(int(line))


def read_status(conn: socket.socket) -> int:
    """Block until the child's exit; its return code."""
    try:
        return _exit_code(_read_line(conn))
    finally:
        conn.close()


class _Child(abc.ABC):
    """Signals for a forked child, sent only while it runs (its pid is not reused then:
    the server reaps it only after it exits)."""

    pid: int

    @abc.abstractmethod
    def _running(self) -> bool:
        """Whether the child has not exited yet (its status not read)."""

    def send_signal(self, sig: int) -> None:
        if self._running():
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_servers: dict[tuple[str, ...], ForkServer] = {}


def server(preload: Sequence[str] = PRELOAD) -> ForkServer:
    """This process's server for ``preload`` (started on first spawn, stopped at exit)."""
    key = tuple(preload)
    if key not in _servers:
        if not _servers:
            import atexit

            atexit.register(lambda: [s.close() for s in _servers.values()])
        _servers[key] = ForkServer(key)
    return _servers[key]


def run(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    preload: Sequence[str] = PRELOAD,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True)``, the program forked from
    the server for ``preload`` where :func:`supported` (an exec otherwise). A program
    that runs past ``timeout`` is killed, and ``subprocess.TimeoutExpired`` raised."""
    if not supported(argv, env):
        return subprocess.run(
            list(argv), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = ForkedPopen(
            argv, env=env, cwd=cwd, stdout=out.fileno(), stderr=err.fileno(), preload=preload
        )
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            list(argv),
            code,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def _kill_unclaimed(spawned: asyncio.Future[tuple[int, socket.socket]]) -> None:
    if not spawned.cancelled() and spawned.exception() is None:
        pid, conn = spawned.result()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        conn.close()


class ForkedProcess(_Child):
    """An asyncio child started by a fork server: the part of
    ``asyncio.subprocess.Process`` the tests use (``stdout`` merges stderr)."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stdin: asyncio.StreamWriter | None = None
        conn.setblocking(False)
        self._status = asyncio.create_task(self._read_status(conn))
        self._kept: collections.deque[str] = collections.deque()
        self._keeping: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        *argv: str,
        env: dict[str, str] | None,
        cwd: str | None = None,
        stdin: bool = False,
        preload: Sequence[str] = PRELOAD,
    ) -> ForkedProcess:
        loop = asyncio.get_running_loop()
        out_r, out_w = os.pipe()
        in_r, in_w = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY), -1)
        spawned = loop.run_in_executor(
            None,
            lambda: server(preload).spawn(argv, env=env, cwd=cwd, fds=(in_r, out_w, out_w)),
        )
        # The child's ends are closed here once sent, even if this start is cancelled.
        spawned.add_done_callback(lambda _: _close(out_w, in_r))
        try:
            pid, conn = await asyncio.shield(spawned)
        except BaseException as exc:
            _close(out_r, in_w)
            if isinstance(exc, asyncio.CancelledError):
                # The fork may still happen: a child nobody holds must not outlive the test.
                spawned.add_done_callback(_kill_unclaimed)
            raise
        process = cls(pid, conn)
        reader = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(out_r, "rb", 0)
        )
        process.stdout = reader
        if in_w >= 0:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, os.fdopen(in_w, "wb", 0)
            )
            process.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        return process

    async def _read_status(self, conn: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        data = b""
        try:
            while not data.endswith(b"\n"):
                chunk = await loop.sock_recv(conn, 64)
                if not chunk:
                    raise ConnectionError("fork server closed the connection")
                data += chunk
        finally:
            conn.close()
        self.returncode = _exit_code(data)
        if self.stdin is not None:
            self.stdin.close()
        return self.returncode

    def keep_output(self, lines: int = 200) -> None:
        """Read the child's output as it comes, keeping its last ``lines`` lines
        (:attr:`output`), for a server whose output no test reads: a pipe nobody reads
        stops the child that fills it."""
        assert self.stdout is not None and self._keeping is None
        self._kept = collections.deque(maxlen=lines)
        self._keeping = asyncio.create_task(self._keep(self.stdout))

    async def _keep(self, stdout: asyncio.StreamReader) -> None:
        async for line in stdout:
            self._kept.append(line.decode(errors="replace"))

    @property
    def output(self) -> str:
        """The output kept so far (:meth:`keep_output`)."""
        return "".join(self._kept)

    async def wait(self) -> int:
        """The exit code, once the child has exited (and its kept output is read)."""
        code = await asyncio.shield(self._status)
        if self._keeping is not None:
            await self._keeping  # the pipe ends with the child
        return code

    def _running(self) -> bool:
        return self.returncode is None


class ForkedPopen(_Child):
    """A child started by a fork server for threaded callers: the part of
    ``subprocess.Popen`` the chaos run uses. ``stdout``: a text pipe, or a file's fd."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None,
        cwd: str | None,
        stdout: int | None,
        stderr: int,
        preload: Sequence[str] = PRELOAD,
    ) -> None:
        devnull = os.open(os.devnull, os.O_RDONLY)
        out_r = -1
        if stdout is None:
            out_r, out_w = os.pipe()
        else:
            out_w = stdout
        try:
            self.pid, self._conn = server(preload).spawn(
                argv, env=env, cwd=cwd, fds=(devnull, out_w, stderr)
            )
        finally:
            os.close(devnull)
            if stdout is None:
                os.close(out_w)
        self.stdout = os.fdopen(out_r, "r") if out_r >= 0 else None
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                ready, _, _ = select.select([self._conn], [], [], 0)
                if ready:
                    self.returncode = read_status(self._conn)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._lock:
            if self.returncode is None:
                ready, _, _ = select.select([self._conn], [], [], timeout)
                if not ready:
                    raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
                self.returncode = read_status(self._conn)
            return self.returncode

    def _running(self) -> bool:
        return self.poll() is None
