"""The packages of the monorepo meet only through public names, and never in a loop.

Each package (its "room") may use another package only through names without a leading
underscore: no ``from soorma._http import ...``, no ``soorma._transport``, no
``client._send(...)`` on another package's object. And the graph of which package imports
which has no cycle: the SDK never imports a service, servicekit never imports the SDK.

Read from the source tree with :mod:`ast`, so nothing is imported and lazy imports inside
functions count as much as top-level ones.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Room:
    """One package: its import name and the folder holding its sources."""

    name: str
    path: Path


def rooms(root: Path = ROOT) -> list[Room]:
    """The SDK, the common DTOs, servicekit, every service, and the examples."""
    found = [Room("soorma", root / "sdk" / "soorma"), Room("soorma_common", root / "common")]
    for service in sorted((root / "services").iterdir()):
        for package in sorted(service.iterdir()):
            if (package / "__init__.py").is_file():
                found.append(Room(package.name, package))
    found.append(Room("examples", root / "examples"))
    return found


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    """Parsed once per source text: the checks below walk the same tree several times."""
    return ast.parse(text, filename=filename)


def _sources(room: Room) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(room.path.rglob("*.py")):
        yield path, _parse(path.read_text(), str(path))


def _private_definitions(tree: ast.Module) -> set[str]:
    """Underscore names a module defines: functions, classes, methods, attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return {name for name in names if _private(name)}


@dataclass
class Findings:
    """What one scan found: private uses across rooms, and the room import graph."""

    private: list[str]
    edges: dict[str, set[str]]


def scan(root: Path = ROOT) -> Findings:
    """Every private name one room takes from another, and which room imports which."""
    all_rooms = rooms(root)
    packages = {room.name for room in all_rooms}
    trees = {room.name: list(_sources(room)) for room in all_rooms}
    defined = {
        name: set().union(*(_private_definitions(tree) for _, tree in sources))
        for name, sources in trees.items()
    }
    private: list[str] = []
    edges: dict[str, set[str]] = {name: set() for name in packages}
    for room in all_rooms:
        ours = defined[room.name]
        theirs = set().union(*(names for other, names in defined.items() if other != room.name))
        for path, tree in trees[room.name]:
            where = path.relative_to(root)
            aliases: dict[str, str] = {}  # local name -> other room it names
            for node in ast.walk(tree):
                modules: list[tuple[str, list[str]]] = []
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        modules.append((alias.name, []))
                        top = alias.name.split(".")[0]
                        aliases[(alias.asname or alias.name).split(".")[0]] = top
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules.append((node.module, [alias.name for alias in node.names]))
                    top = node.module.split(".")[0]
                    for alias in node.names:
                        aliases[alias.asname or alias.name] = top
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "import_module"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    modules.append((node.args[0].value, []))
                for module, names in modules:
                    parts = module.split(".")
                    if parts[0] not in packages or parts[0] == room.name:
                        continue
                    edges[room.name].add(parts[0])
                    bad = [p for p in parts[1:] if _private(p)] + [n for n in names if _private(n)]
                    if bad:
                        private.append(f"{where}:{node.lineno}: {module} {bad}")
            for node in ast.walk(tree):
                if not isinstance(node, ast.Attribute) or not _private(node.attr):
                    continue
                value = node.value
                if isinstance(value, ast.Name) and value.id in {"self", "cls"}:
                    continue
                if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super":
                    continue
                other = aliases.get(value.id) if isinstance(value, ast.Name) else None
                if other in packages and other != room.name:
                    private.append(f"{where}:{node.lineno}: {other} .{node.attr}")
                elif node.attr in theirs and node.attr not in ours:
                    private.append(f"{where}:{node.lineno}: another package's .{node.attr}")
    return Findings(private=private, edges=edges)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import loop between rooms (each reported once, from its smallest name)."""
    found: list[list[str]] = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                found.append([*path, start])
            elif nxt > start and nxt not in path:
                walk(start, nxt, [*path, nxt])

    for start in sorted(edges):
        walk(start, start, [start])
    return found


@pytest.fixture(scope="module")
def findings() -> Findings:
    """One scan of this repository for the checks that read it (they only read it)."""
    return scan()


def test_no_package_uses_another_packages_private_names(findings: Findings) -> None:
    assert findings.private == [], "\n".join(findings.private)


def test_no_import_cycle_between_packages(findings: Findings) -> None:
    loops = cycles(findings.edges)
    assert loops == [], "\n".join(" -> ".join(loop) for loop in loops)


def test_the_sdk_and_servicekit_import_no_service_and_common_imports_nothing(
    findings: Findings,
) -> None:
    edges = findings.edges
    assert edges["soorma_common"] == set()
    assert edges["soorma"] == {"soorma_common"}
    assert edges["servicekit"] == {"soorma_common"}


def test_every_service_is_found_through_its_entry_point() -> None:
    import tomllib
    from importlib.metadata import entry_points

    from soorma._dev import SERVICES

    declared = {}
    for room in rooms():
        pyproject = room.path.parent / "pyproject.toml"
        if room.path.parent.parent.name != "services" or room.name == "servicekit":
            continue
        project = tomllib.loads(pyproject.read_text())["project"]
        group = project["entry-points"]["soorma.services"]
        assert list(group.values()) == [room.name], pyproject
        declared.update(group)
    assert {service.name for service in SERVICES} == set(declared)
    installed = {ep.name: ep.value for ep in entry_points(group="soorma.services")}
    assert installed == declared


def test_platform_event_types_are_spelled_once() -> None:
    """``plan.*``, ``task.timeout``, ... are written in soorma_common.events only."""
    from soorma_common import events

    names = {
        getattr(events, name)
        for name in events.__all__
        if isinstance(getattr(events, name), str)
        and re.fullmatch(r"[a-z_]+\.[a-z_]+", getattr(events, name))
    }
    assert {"plan.started", "task.timeout", "notification.human_input"} <= names
    home = ROOT / "common" / "soorma_common" / "events.py"
    found = []
    for room in rooms():
        for path, tree in _sources(room):
            if path == home:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == [], "\n".join(found)


def test_the_check_sees_private_imports_attributes_and_loops(tmp_path: Path) -> None:
    def write(relative: str, text: str) -> None:
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    write("sdk/soorma/__init__.py", "import servicekit\n")
    write("sdk/soorma/_http.py", "class ServiceClient:\n    def _send(self): ...\n")
    write("common/soorma_common/__init__.py", "")
    write("services/servicekit/servicekit/__init__.py", "from soorma import tracing\n")
    write(
        "services/tracker/tracker/__init__.py",
        "from soorma._http import ServiceClient\nimport soorma\n"
        "soorma._http\nasync def f(m):\n    await m._send()\n",
    )
    write("examples/one/agent.py", "from soorma import _http\n")
    findings = scan(tmp_path)
    assert len(findings.private) == 4, findings.private
    assert cycles(findings.edges) == [["servicekit", "soorma", "servicekit"]]
