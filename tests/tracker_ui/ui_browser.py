"""A real headless Chromium driven by selenium, for the tracker UI's tests.

Debian's ``chromium`` + ``chromium-driver`` packages (``.ci/run`` installs them). Without
them the browser tests skip locally and FAIL in CI (``CI=true``), so CI never silently
skips them. Selenium is pointed at the system driver: Selenium Manager (which downloads
drivers) never runs, the machines are offline.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver", "/usr/lib/chromium/chromedriver")


def _which(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
        if os.path.isfile(name) and os.access(name, os.X_OK):
            return name
    return None


def require_chromium() -> tuple[str, str]:
    """Paths of the browser and its driver; skip (locally) or fail (CI) without them."""
    browser, driver = _which(BROWSERS), _which(DRIVERS)
    if browser and driver:
        return browser, driver
    missing = "chromium" if not browser else "chromium-driver"
    message = f"{missing} not installed: apt-get install chromium chromium-driver"
    if IN_CI:
        pytest.fail(f"{message} (CI must run the browser tests)")
    pytest.skip(message)


def start_chromium(width: int = 1360, height: int = 900) -> Any:
    """A headless Chromium session (one per test module: starting one costs ~1 s)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--disable-extensions",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--mute-audio",
        "--proxy-server=direct://",
        "--proxy-bypass-list=*",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def wait_for(
    driver: Any, condition: Callable[[Any], Any], timeout: float = 30, message: str = ""
) -> Any:
    """Poll ``condition(driver)`` until truthy (selenium's WebDriverWait).

    Live pages re-render: an element that went stale mid-read is simply read again.
    """
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    wait = WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=ignored)
    return wait.until(condition, message)


def click(driver: Any, selector: str, index: int = 0, message: str = "") -> None:
    """Click the ``index``-th element matching ``selector``, found again if the live list
    re-rendered between finding it and clicking it (auto-refresh, a filter's reload)."""

    def attempt(d: Any) -> bool:
        found = d.find_elements("css selector", selector)
        if len(found) <= index:
            return False
        found[index].click()
        return True

    wait_for(driver, attempt, message=message or f"nothing to click at {selector!r}")


def console_errors(driver: Any) -> list[str]:
    """The browser console's errors since the last call (JS exceptions, CSP violations,
    failed loads), except the API's 404s for a plan the tracker has not projected yet
    (the plan page retries those)."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e.get("level") == "SEVERE"
        and not ("/v1/tracker/plans/" in e["message"] and "status of 404" in e["message"])
    ]
