"""The ``loadtests/`` scripts as modules, for tests of their own counting (they are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

LOADTESTS = Path(__file__).resolve().parents[2] / "loadtests"


def loadtest_script(name: str) -> ModuleType:
    """``loadtests/<name>.py`` imported once per test session, as the module ``loadtest_<name>``.

    Raises:
        FileNotFoundError: no such script.
    """
    module_name = f"loadtest_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = LOADTESTS / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module
