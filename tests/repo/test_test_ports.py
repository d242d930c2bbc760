"""The suite's ports: a server's port cannot be taken by the kernel in between, and the
"nothing listens here" port stays that way while servers come and go."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testsupport.server import PORTS_FROM, PORTS_PER_WORKER, closed_port, free_port

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_port_refuses_connections_and_no_server_can_bind_it() -> None:
    port = closed_port()
    with socket.socket() as client, pytest.raises(ConnectionRefusedError):
        client.connect(("127.0.0.1", port))
    # As uvicorn binds (SO_REUSEADDR set): a port merely free when picked was given to the
    # next test server, and a client meant to find nothing reached that server instead.
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with pytest.raises(OSError, match="in use"):
            server.bind(("127.0.0.1", port))
    assert closed_port() == port


def test_free_ports_are_outside_the_kernels_ephemeral_range_and_rotate() -> None:
    # The kernel gives ports of that range to bind(0) and to outgoing connections: a
    # port picked there could be taken before the server bound it.
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = [free_port() for _ in range(20)]
    assert all(not low <= port <= high for port in ports), ports
    assert len(set(ports)) == 20  # the next port each time, not the same free one
    assert max(ports) - min(ports) < PORTS_PER_WORKER


def _bench_module(name: str) -> Any:
    bench = ROOT / "bench"
    spec = importlib.util.spec_from_file_location(f"soorma_bench_{name}", bench / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    saved = list(sys.path)
    sys.path.insert(0, str(bench))  # the scripts import their neighbours by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved  # bench/ and bench/chaos/ must not shadow later imports
    return module


def test_the_benchmarks_servers_ports_are_outside_the_ephemeral_range_and_the_suites_blocks():
    # The chaos run starts its servers on these inside the suite, beside three workers'
    # outgoing connections: a port of the ephemeral range was once taken before its
    # event service bound it.
    harness = _bench_module("harness")
    low, _ = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = [harness.free_port() for _ in range(20)]
    assert all(port < min(low, PORTS_FROM) for port in ports), ports


def test_a_chaos_process_that_exits_before_it_is_ready_fails_at_once_with_its_log(
    tmp_path: Path,
) -> None:
    chaos = _bench_module("chaos")
    proc = chaos.Proc(
        "event",
        [sys.executable, "-c", "import sys; print('port in use', file=sys.stderr); sys.exit(3)"],
        {},
        tmp_path,
        ready_url=f"http://127.0.0.1:{closed_port()}/ready",
    )
    proc.start()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="event exited before it was ready") as failure:
        asyncio.run(proc.wait_ready(within=60))
    assert time.monotonic() - started < 30
    assert "port in use" in str(failure.value)
