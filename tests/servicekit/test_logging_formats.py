"""servicekit.logging: JSON lines by default, readable text with SOORMA_LOG_FORMAT=text."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from pydantic import ValidationError

from servicekit.logging import configure_logging, log_format, make_formatter, request_id_var
from servicekit.settings import LoggingSettings, ServiceSettings


def _record(msg: str = "stream opened", **extra: object) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "event_service.streams", "msg": msg})
    record.levelname = "WARNING"
    record.__dict__.update(extra)
    return record


def test_text_is_one_readable_line_with_the_extra_fields_and_request_id():
    token = request_id_var.set("r-1")
    try:
        line = make_formatter("event-service", "text").format(
            _record(topic="orders", reason="two words")
        )
    finally:
        request_id_var.reset(token)
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d\.\d{3} WARN  event_service\.streams: stream opened "
        r"topic=orders reason='two words' request_id=r-1",
        line,
    ), line


def test_json_stays_the_default_and_keeps_its_fields(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SOORMA_LOG_FORMAT", raising=False)
    doc = json.loads(make_formatter("event-service").format(_record(topic="orders")))
    assert doc["service"] == "event-service" and doc["level"] == "warning"
    assert doc["msg"] == "stream opened" and doc["topic"] == "orders"


def test_the_environment_selects_the_format_and_a_typo_is_named(
    monkeypatch: pytest.MonkeyPatch,
):
    # Read with the rest of the service's settings (LoggingSettings), not by the formatter.
    monkeypatch.setenv("SOORMA_LOG_FORMAT", "TEXT")
    assert LoggingSettings().log_format == "text"
    assert ServiceSettings().log_format == "text"
    assert log_format() == "json"
    monkeypatch.setenv("SOORMA_LOG_FORMAT", "")
    assert LoggingSettings().log_format == "json"
    monkeypatch.setenv("SOORMA_LOG_FORMAT", "yaml")
    with pytest.raises(ValidationError, match="SOORMA_LOG_FORMAT must be one of json, text"):
        LoggingSettings()
    with pytest.raises(ValueError, match="SOORMA_LOG_FORMAT must be one of json, text"):
        log_format("yaml")


def test_configure_logging_switches_the_one_handler(monkeypatch: pytest.MonkeyPatch):
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    try:
        configure_logging("memory-service", "INFO", "json")
        configure_logging("memory-service", "INFO", "text")
        ours = [h for h in root.handlers if getattr(h, "_soorma", False)]
        assert len(ours) == 1
        stream = io.StringIO()
        ours[0].setStream(stream)  # type: ignore[attr-defined]
        logging.getLogger("memory_service.x").info("hello")
        assert stream.getvalue().rstrip().endswith("INFO  memory_service.x: hello")
    finally:
        for handler in list(root.handlers):
            if handler not in before[0]:
                root.removeHandler(handler)
        root.setLevel(before[1])
