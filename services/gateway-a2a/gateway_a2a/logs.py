"""A client's mistake is one log line, not a traceback.

a2a-sdk logs a request it cannot parse or validate with ``logger.exception``: every
malformed request from outside would print a stack trace. :class:`ClientErrorLogs`, a
filter on a2a-sdk's request loggers, turns such a record into one ``WARNING`` line that
ends with the error's own message; records of real server faults keep their traceback.
A record a2a-sdk follows with its own one-line ``Request error`` for the same request
(a JSON-RPC body that does not parse, an unsupported ``A2A-Version``) is dropped, so one
bad request is one line.
"""

from __future__ import annotations

import logging
import re

from a2a.utils.errors import A2AError, InternalError

# a2a-sdk's loggers on the request path.
LOGGERS = (
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.server.routes.rest_dispatcher",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.compat.v0_3.rest_adapter",
    "a2a.utils.error_handlers",
    "a2a.utils.version_validator",
)
# (logger, message) a2a-sdk logs just before its own "Request error" line for the request.
FOLLOWED = frozenset(
    {
        ("a2a.server.routes.jsonrpc_dispatcher", "Failed to validate base JSON-RPC request"),
        ("a2a.server.routes.jsonrpc_dispatcher", "Failed to parse request params"),
        ("a2a.utils.version_validator", "Version mismatch: actual='%s', expected='%s'"),
    }
)
# Messages a2a-sdk logs for a request that does not parse or validate.
CLIENT_ERROR_MESSAGES = frozenset(
    {
        "Failed to validate base JSON-RPC request",
        "Failed to validate base JSON-RPC request for v0.3",
        "Failed to parse request params",
    }
)
MAX_DETAIL = 300
_SPACES = re.compile(r"\s+")


def _is_client_error(record: logging.LogRecord) -> bool:
    if record.msg in CLIENT_ERROR_MESSAGES:
        return True
    error = record.exc_info[1] if record.exc_info else None
    return isinstance(error, A2AError) and not isinstance(error, InternalError)


class ClientErrorLogs(logging.Filter):
    """See the module docstring."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.name, record.msg) in FOLLOWED:
            return False
        if not record.exc_info or not _is_client_error(record):
            return True
        error = record.exc_info[1]
        detail = _SPACES.sub(" ", f"{type(error).__name__}: {error}").strip()
        if len(detail) > MAX_DETAIL:
            detail = detail[: MAX_DETAIL - 1] + "…"
        record.msg = f"{record.getMessage()}: {detail}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        return True


def install() -> None:
    """Put the filter on a2a-sdk's request loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ClientErrorLogs) for f in logger.filters):
            logger.addFilter(ClientErrorLogs())
