"""Service logs, one record a line: JSON objects (default) or human-readable text.

``SOORMA_LOG_FORMAT=json`` (the default; containers, ``compose.yaml``) writes one JSON
object a line, with the request id when there is one. ``SOORMA_LOG_FORMAT=text`` (what
``soorma dev`` uses unless ``--log-format json``) writes ``HH:MM:SS.mmm LEVEL logger:
message key=value ...``, the same fields, for a terminal.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "soorma_request_id", default=None
)

LOG_FORMATS = ("json", "text")
# Set by other formatters on the shared record; not fields of its own.
_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own fields (``logger.info(..., extra={...})``)."""
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _RESERVED and not key.startswith("_")
    }


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
        doc.update(_extras(record))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


class TextFormatter(logging.Formatter):
    """``12:04:05.123 WARN  event_service.streams: message key=value`` (local time).

    The logger name says which service wrote the line (``soorma dev`` runs several in
    one process); extra fields and the request id follow as ``key=value``.
    """

    _LEVELS = {"WARNING": "WARN", "CRITICAL": "CRIT"}

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        level = self._LEVELS.get(record.levelname, record.levelname)
        fields = _extras(record)
        rid = request_id_var.get()
        if rid:
            fields["request_id"] = rid
        text = f"{when} {level:<5} {record.name}: {record.getMessage()}"
        if fields:
            text += " " + " ".join(f"{key}={_short(value)}" for key, value in fields.items())
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def _short(value: object) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if " " not in text else repr(text)


def log_format(value: str | None = None) -> str:
    """``value`` (any case), else ``json``; checked.

    ``SOORMA_LOG_FORMAT`` is read with the rest of a service's settings
    (``LoggingSettings.log_format``), which the app factory passes here.
    """
    chosen = (value or "json").strip().lower()
    if chosen not in LOG_FORMATS:
        raise ValueError(
            f"SOORMA_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {chosen!r}"
        )
    return chosen


def make_formatter(service: str, fmt: str | None = None) -> logging.Formatter:
    """The formatter for ``fmt`` (see :func:`log_format`)."""
    return TextFormatter(service) if log_format(fmt) == "text" else JsonFormatter(service)


def configure_logging(service: str, level: str = "INFO", fmt: str | None = None) -> None:
    """Send the root logger's records to stderr, one a line (idempotent).

    Args:
        service: Name written in every JSON record.
        level: Root level.
        fmt: ``json`` (default) or ``text``; a service passes its settings'
            ``log_format`` (``SOORMA_LOG_FORMAT``).
    """
    formatter = make_formatter(service, fmt)
    root = logging.getLogger()
    for handler in root.handlers:
        if getattr(handler, "_soorma", False):
            handler.setFormatter(formatter)
            break
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler._soorma = True  # type: ignore[attr-defined]
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level.upper())
