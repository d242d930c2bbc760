"""The suite's "nothing listens here" port stays that way while servers come and go."""

from __future__ import annotations

import socket

import pytest

from testsupport.server import closed_port


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
