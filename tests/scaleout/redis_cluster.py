"""A throwaway Redis Cluster of three masters on loopback ports, for one test module.

``redis-server --cluster-enabled yes`` three times in a temporary directory, joined with
``redis-cli --cluster create ... --cluster-replicas 0``; stopped (and its files removed)
afterwards. Without ``redis-server`` the tests skip locally and fail in CI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
MASTERS = 3
BUS_OFFSET = 10_000  # Redis Cluster's node-to-node bus listens on port + 10000


def _require_binaries() -> tuple[str, str]:
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server and cli:
        return server, cli
    if IN_CI:
        pytest.fail("redis-server and redis-cli must be installed in CI (Redis Cluster tests)")
    pytest.skip("redis-server/redis-cli not installed")


def _node_port() -> int:
    """A free port whose cluster bus port (port + 10000) is valid and free too."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            if port + BUS_OFFSET > 65535:
                continue
            with socket.socket() as bus:
                try:
                    bus.bind(("127.0.0.1", port + BUS_OFFSET))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _ping(cli: str, port: int) -> bool:
    done = subprocess.run(
        [cli, "-p", str(port), "ping"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() == "PONG"


def _cluster_ok(cli: str, port: int) -> bool:
    done = subprocess.run(
        [cli, "-p", str(port), "cluster", "info"], capture_output=True, text=True, check=False
    )
    return "cluster_state:ok" in done.stdout


@contextlib.contextmanager
def redis_cluster(workdir: Path) -> Iterator[str]:
    """Start the cluster; yields a ``redis://127.0.0.1:<port>`` URL of one master."""
    server, cli = _require_binaries()
    ports: list[int] = []
    while len(ports) < MASTERS:
        if (port := _node_port()) not in ports:
            ports.append(port)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            node = workdir / str(port)
            node.mkdir()
            procs.append(
                subprocess.Popen(
                    [
                        server,
                        "--port",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "5000",
                        "--appendonly",
                        "no",
                        "--save",
                        "",
                        "--dir",
                        str(node),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        _wait(lambda: all(_ping(cli, p) for p in ports), "cluster nodes did not start")
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        _wait(lambda: all(_cluster_ok(cli, p) for p in ports), "cluster not ok")
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(ready: object, message: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise RuntimeError(message)
