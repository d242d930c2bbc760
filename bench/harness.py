"""What the benchmark scripts share: percentiles, CPU accounting and a service subprocess.

Each script measures a different service against its own baseline; how a number is taken
(percentile, CPU share, the server's pinning and start-up) must be the same in all of them
so their results compare.
"""

from __future__ import annotations

import os
import random
import resource
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Ports for the benchmarks' servers: below the kernel's ephemeral range, and below the
# test suite's blocks (tests/testsupport/server.py: 20,000 on), which run these scripts too.
PORTS_FROM, PORTS_TO = 10_000, 20_000


def free_port() -> int:
    """A loopback port for a server about to bind it.

    Not one the kernel hands out for ``bind(0)``: a port of its ephemeral range, free
    when picked, can become the local port of any outgoing connection before the server
    binds it (the chaos run inside the busy test suite once lost its event service so).
    Falls back to ``bind(0)`` where that range leaves no room below it.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except OSError:  # not Linux: keep to the range IANA leaves to no one (49152 on)
        low = 49_152
    top = min(PORTS_TO, low)
    for _ in range(200 if top > PORTS_FROM else 0):
        port = random.randrange(PORTS_FROM, top)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank below); NaN for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) used by process ``pid``, or by this one."""
    if pid is None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pin_load_generator() -> None:
    """Run this process (the load generator) on the last core, away from the server's core 0.

    On a single core there is nothing to separate, so nothing is pinned.
    """
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {(os.cpu_count() or 2) - 1})


class CpuMeter:
    """CPU seconds used by this process (client) and by the server process."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid

    def snapshot(self) -> tuple[float, float, float]:
        server = 0.0 if self.server_pid is None else cpu_seconds(self.server_pid)
        return time.perf_counter(), cpu_seconds(), server

    @staticmethod
    def report(start: tuple[float, float, float], end: tuple[float, float, float]) -> dict:
        wall = end[0] - start[0]
        return {
            "wall_s": round(wall, 3),
            "client_cpu_pct": round(100 * (end[1] - start[1]) / wall, 1),
            "server_cpu_pct": round(100 * (end[2] - start[2]) / wall, 1),
        }


class UvicornService:
    """A service's app factory in a subprocess, served as it is deployed
    (``python -m servicekit.server``: uvicorn with uvloop, httptools and servicekit's
    protocol, no access log), pinned to core 0 when there are two or more cores (the
    load generator pins itself to the last one).

    Args:
        name: For error messages, e.g. ``"event service"``.
        factory: ``module:function`` returning the app.
        port: Loopback port to listen on.
        env: Settings for the service, on top of this process's environment.
        ready_marker: Bytes the ``/ready`` body must contain, so another service that
            holds the port is not taken for ours (``None``: any 200 will do).
        ready_attempts: ``/ready`` polls (about 50 ms apart) before giving up.
    """

    def __init__(
        self,
        *,
        name: str,
        factory: str,
        port: int,
        env: dict[str, str],
        ready_marker: bytes | None = None,
        ready_attempts: int = 200,
    ) -> None:
        self.name = name
        self.factory = factory
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.env = env
        self.ready_marker = ready_marker
        self.ready_attempts = ready_attempts
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until ``/ready`` answers 200."""
        cmd = [
            sys.executable,
            "-m",
            "servicekit.server",
            self.factory,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        if (os.cpu_count() or 1) >= 2:
            cmd = ["taskset", "-c", "0", *cmd]
        self.proc = subprocess.Popen(cmd, env={**os.environ, **self.env}, cwd=ROOT)
        for _ in range(self.ready_attempts):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited (is port {self.port} taken?)")
            try:
                with urllib.request.urlopen(self.url + "/ready", timeout=1) as resp:
                    if resp.status == 200 and (
                        self.ready_marker is None or self.ready_marker in resp.read()
                    ):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not become ready")

    def rss_kib(self) -> int:
        """The server's resident memory in KiB."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        """Terminate the server (kill it if it lingers)."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


async def create_database(url: str, prefix: str = "soorma_bench") -> str:
    """A fresh PostgreSQL database next to ``url``'s (named ``<prefix>_<random>``); its URL."""
    import asyncpg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return url.rpartition("/")[0] + "/" + name


async def drop_database(url: str, db_url: str) -> None:
    """Drop the database ``db_url`` names (made by :func:`create_database`), through ``url``."""
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{db_url.rpartition("/")[2]}" WITH (FORCE)')
    finally:
        await conn.close()
