"""A do-nothing OTLP/HTTP receiver for benchmarks with tracing on (docs/benchmarks.md).

Usage: .venv/bin/python bench/otlp_sink.py [PORT]   (default 4318; Ctrl-C or SIGTERM stops it)

Answers every ``POST /v1/traces`` with 200 and an empty body (a valid, empty
``ExportTraceServiceResponse``), so the services' exporters do all their work (encoding,
batching, sending) without a collector; prints the requests and bytes received on exit.
"""

from __future__ import annotations

import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

received = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        size = int(self.headers.get("content-length", 0))
        self.rfile.read(size)
        received["requests"] += 1
        received["bytes"] += size
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4318
    server = ThreadingHTTPServer(("127.0.0.1", port), Sink)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print(f"otlp sink: {received['requests']} exports, {received['bytes']} bytes", flush=True)


if __name__ == "__main__":
    main()
