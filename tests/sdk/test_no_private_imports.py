"""No SDK module imports another module's private names (a private name is that
module's own business; what several modules share gets a public name in a small module)."""

from __future__ import annotations

import ast
from pathlib import Path

import soorma

SDK = Path(soorma.__file__).parent


def _is_module(package: str, name: str) -> bool:
    base = SDK.parent.joinpath(*package.split("."), name)
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def test_no_private_names_are_imported_across_sdk_modules() -> None:
    found = []
    for path in sorted(SDK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("soorma"):
                continue
            for alias in node.names:
                module = node.module or ""
                if alias.name.startswith("_") and not _is_module(module, alias.name):
                    found.append(f"{path.relative_to(SDK)}:{node.lineno} {module}.{alias.name}")
    assert found == []
