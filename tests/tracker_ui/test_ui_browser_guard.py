"""Without Chromium the browser tests skip locally but fail in CI (never a silent skip)."""

from __future__ import annotations

import pytest
import ui_browser


def test_missing_chromium_skips_locally_and_fails_in_ci(monkeypatch):
    monkeypatch.setattr(ui_browser.shutil, "which", lambda name: None)
    monkeypatch.setattr(ui_browser, "DRIVERS", ("chromedriver",))
    monkeypatch.setattr(ui_browser, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        ui_browser.require_chromium()
    monkeypatch.setattr(ui_browser, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI must run the browser tests"):
        ui_browser.require_chromium()
