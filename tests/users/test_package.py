"""The users package is a library: the console pages and the admin API import it, never the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

import switchboard.users

PACKAGE_DIR = Path(switchboard.users.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_users_imports_neither_the_console_nor_the_api():
    files = sorted(PACKAGE_DIR.glob("*.py"))
    assert files
    for path in files:
        bad = {
            name
            for name in _imported_modules(path)
            if name.startswith(("switchboard.console", "switchboard.api"))
        }
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_console_and_api_authenticate_through_users():
    root = PACKAGE_DIR.parent
    assert "switchboard.users" in _imported_modules(root / "api" / "access.py")
    assert "switchboard.users" in _imported_modules(root / "console" / "deps.py")
    assert not (root / "console" / "auth.py").exists()
