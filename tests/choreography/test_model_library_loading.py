"""The planner says it is loading its model library, instead of seconds of silence."""

from __future__ import annotations

import logging

import pytest

from soorma.ai import _llm


def test_loading_the_model_library_is_said_before_and_after(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_llm, "_litellm", None)
    caplog.set_level(logging.INFO, logger="soorma.ai")
    assert _llm.load_litellm() is not None
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "loading the model library (litellm); this takes a few seconds"
    assert messages[1].startswith("model library loaded in ")
