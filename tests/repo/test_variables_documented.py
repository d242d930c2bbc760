"""Every ``SOORMA_*`` variable the platform knows is documented, and every one the code,
the packaging or the scripts name is known (so ``soorma dev``'s "unknown variable" warning
never fires on a real one, and none is read without the docs saying so)."""

from __future__ import annotations

import re
from pathlib import Path

from soorma._config import KNOWN_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bSOORMA_[A-Z0-9_]*[A-Z0-9]\b")
# Names that are not variables a deployment sets: the test command's own switches, and
# the misspelling soorma._config's docstring shows its warning with.
NOT_SETTINGS = {
    "SOORMA_TEST_DATABASE_URL",
    "SOORMA_TEST_REDIS_URL",
    "SOORMA_TEST_WORKERS",
    "SOORMA_EVENTS_URL",
}


def documented_text() -> str:
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_every_known_variable_is_documented() -> None:
    text = documented_text()
    # A service's page may list its settings without the prefix, as a code span.
    missing = [
        name
        for name in sorted(KNOWN_VARIABLES)
        if name not in text and f"`{name.removeprefix('SOORMA_')}`" not in text
    ]
    assert missing == [], f"document these in docs/ (deployment.md or the service page): {missing}"


def test_every_variable_the_code_names_is_known() -> None:
    sources = [
        *(ROOT / "sdk").rglob("*.py"),
        *(ROOT / "common").rglob("*.py"),
        *(ROOT / "services").rglob("*.py"),
        *(ROOT / "scripts").glob("*.sh"),
        ROOT / "compose.yaml",
        ROOT / "Dockerfile",
    ]
    named: dict[str, str] = {}
    for path in sources:
        for name in NAME.findall(path.read_text(encoding="utf-8")):
            named.setdefault(name, str(path.relative_to(ROOT)))
    unknown = {
        name: where
        for name, where in sorted(named.items())
        if name not in KNOWN_VARIABLES and name not in NOT_SETTINGS
    }
    assert unknown == {}, f"add these to soorma._config.KNOWN_VARIABLES: {unknown}"
