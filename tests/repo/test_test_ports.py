"""The suite's ports: a server's port cannot be taken by the kernel in between, and the
"nothing listens here" port stays that way while servers come and go."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from testsupport.server import PORTS_PER_WORKER, closed_port, free_port


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
