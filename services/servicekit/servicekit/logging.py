"""Structured JSON logs, one object a line, with the request id when there is one."""

from __future__ import annotations

import contextvars
import logging
import sys
from datetime import UTC, datetime

import orjson

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "soorma_request_id", default=None
)

_RESERVED = set(vars(logging.makeLogRecord({})))


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid:
            doc["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def configure_logging(service: str, level: str = "INFO") -> None:
    """Send the root logger's records to stderr as JSON (idempotent)."""
    root = logging.getLogger()
    for handler in root.handlers:
        if getattr(handler, "_soorma", False):
            handler.setFormatter(JsonFormatter(service))
            break
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler._soorma = True  # type: ignore[attr-defined]
        handler.setFormatter(JsonFormatter(service))
        root.addHandler(handler)
    root.setLevel(level.upper())
