"""``infra/audit.py`` (``make audit``): the checks pass on this environment, and fail on what they are for."""

from __future__ import annotations

import importlib.util
import sys
from email.message import Message
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_audit():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("switchboard_audit", ROOT / "infra" / "audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


audit = _load_audit()


def _meta(**headers: str | list[str]) -> Message:
    message = Message()
    for name, value in headers.items():
        for item in value if isinstance(value, list) else [value]:
            message[name.replace("_", "-")] = item
    return message


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"License_Expression": "MIT"}, True),
        ({"License_Expression": "Apache-2.0 OR BSD-3-Clause"}, True),
        ({"License_Expression": "MIT OR GPL-2.0-only"}, True),  # dual-licensed: MIT is enough
        ({"License_Expression": "Apache-2.0 AND GPL-3.0-or-later"}, False),
        ({"License": "MPL-2.0 AND MIT"}, True),
        ({"License": "Dual License", "Classifier": ["License :: OSI Approved :: BSD License"]}, True),
        ({"License": "GPL-3.0"}, False),  # html2text
        ({"License_Expression": "AGPL-3.0-only"}, False),
        ({"License": "SSPL-1.0"}, False),
        ({"Classifier": ["License :: OSI Approved :: GNU General Public License v3 (GPLv3)"]}, False),
        ({"License": "Proprietary"}, False),
        ({}, False),
    ],
)
def test_licence_verdicts(headers, allowed):
    assert audit.licence_verdict(_meta(**headers))[0] is allowed


def test_a_gpl_package_fails_the_licence_check():
    packages = {
        "fastapi": _meta(License_Expression="MIT"),
        "html2text": _meta(
            License="GPL-3.0", Classifier=["License :: OSI Approved :: GNU General Public License v3 (GPLv3)"]
        ),
        "mystery": _meta(),
    }
    result = audit.check_licences(
        packages=[("fastapi", "0.163.2"), ("html2text", "2025.4.15"), ("mystery", "1.0")],
        read=packages.__getitem__,
    )
    assert result.status == "FAIL"
    assert result.findings == [
        "html2text 2025.4.15: copyleft: GPL-3.0",
        "mystery 1.0: not an allowed licence: no licence",
    ]


def test_every_locked_runtime_package_is_installed_under_an_allowed_licence():
    result = audit.check_licences()
    assert (result.status, result.findings) == ("ok", [])
    assert result.summary.endswith("runtime packages, every licence permissive")


def test_only_the_expected_pth_files_are_installed():
    result = audit.check_pth()
    assert (result.status, result.findings) == ("ok", [])


def test_an_unexpected_pth_file_fails(tmp_path):
    (tmp_path / "litellm_init.pth").write_text("import os; os.system('curl ... | sh')\n")
    (tmp_path / "distutils-precedence.pth").write_text("import os\n")
    result = audit.check_pth([tmp_path])
    assert result.status == "FAIL"
    assert result.findings == [
        f"{tmp_path / 'distutils-precedence.pth'}: should belong to setuptools, belongs to no distribution",
        f"{tmp_path / 'litellm_init.pth'}: unexpected .pth file (owned by no distribution)",
    ]


def test_requirements_are_pinned_and_litellm_is_the_reviewed_release():
    result = audit.check_pins()
    assert (result.status, result.findings) == ("ok", [])
    assert audit.REVIEWED_LITELLM == "1.110.2"


def test_an_unreachable_advisory_service_is_never_a_pass():
    skipped = {
        "dependencies": [
            {
                "name": "fastapi",
                "skip_reason": "Dependency not found on PyPI and could not be audited: fastapi (0.163.2)",
            },
            {"name": "httpx", "version": "0.28.1", "vulns": []},
        ]
    }
    result = audit.advisory_result(skipped)
    assert result.status == "NOT CHECKED"
    assert result.summary.startswith(
        "the advisory service answered for 1 of 2 locked packages; 1 not audited"
    )
    assert audit.advisory_result(skipped, required=True).status == "FAIL"
    assert audit.advisory_result(None, error="Name or service not known").status == "NOT CHECKED"
    vulnerable = {
        "dependencies": [
            {
                "name": "litellm",
                "version": "1.82.7",
                "vulns": [{"id": "PYSEC-0000-1", "fix_versions": ["1.82.9"]}],
            }
        ]
    }
    failed = audit.advisory_result(vulnerable)
    assert (failed.status, failed.findings) == ("FAIL", ["litellm 1.82.7: PYSEC-0000-1 (fixed in 1.82.9)"])
    clean = audit.advisory_result({"dependencies": [{"name": "httpx", "version": "0.28.1", "vulns": []}]})
    assert (clean.status, clean.summary) == ("ok", "no known vulnerabilities in 1 locked packages")
