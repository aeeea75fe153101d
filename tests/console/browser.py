"""Playwright (Python) on the system Chromium for the console's browser tests (LIBRARIES.md §14).

* :func:`chromium_path`: ``CHROMIUM`` or the first of ``chromium`` / ``chromium-browser`` on ``PATH``.
  Without one the browser tests fail in CI (``CI`` set: ``.ci/run`` installs Debian's ``chromium``) and
  are skipped elsewhere with that reason in the summary.
* Screenshots go to ``TEST_OUTPUT_DIR`` (default ``test-output/``)/``screenshots``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def chromium_path() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("no Chromium for the browser tests (CI installs Debian's chromium package)")
    pytest.skip("browser tests: no chromium on PATH (apt-get install chromium, or set CHROMIUM)")


def screenshot_dir() -> Path:
    folder = Path(os.environ.get("TEST_OUTPUT_DIR", ROOT / "test-output")) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
