"""scripts/warm_bytecode.py names modules that exist: a renamed one would only print a
line at setup and leave its bytecode to be compiled in every process that imports it
where PYTHONDONTWRITEBYTECODE is set."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_setup_warms_is_installed() -> None:
    groups = runpy.run_path(str(ROOT / "scripts" / "warm_bytecode.py"))["GROUPS"]
    assert set(groups) == {"ai", "platform"}
    missing = [name for names in groups.values() for name in names if _missing(name)]
    assert missing == []


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True
