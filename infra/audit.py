"""``make audit``: the dependencies are declared, pinned, free of known advisories, unmodified, and
under licences this Apache-2.0 project can ship.

Checks (each prints one ``ok`` / ``FAIL`` / ``NOT CHECKED`` line and its findings):

* ``declared``: deptry over ``libs/`` and ``services/`` (every import declared, every declared
  package imported, no dev-only package in product code), then over ``tests/`` and ``loadtests/``
  (every import declared somewhere);
* ``pins``: every requirement in ``pyproject.toml`` is ``==``, and LiteLLM is the reviewed release
  (:data:`REVIEWED_LITELLM`), in ``pyproject.toml`` and in ``uv.lock``;
* ``advisories``: pip-audit over every locked package (the hash-pinned export of ``uv.lock``).
  It needs PyPI's per-release JSON API or OSV. Where neither answers (a network that reaches the
  package index only), the packages come back "not found" and the check says **NOT CHECKED**
  with the count, rather than passing; ``AUDIT_REQUIRE_ADVISORIES=1`` turns that into a failure;
* ``pth``: no ``*.pth`` file in site-packages except the ones expected (a ``.pth`` runs at every
  interpreter start: the compromised LiteLLM 1.82.7/1.82.8 shipped ``litellm_init.pth``), each
  owned by its distribution and matching the hash in its ``RECORD``;
* ``licences``: every locked runtime package (``uv export --no-dev``) is installed and declares a
  licence from :data:`ALLOWED_LICENCES` (no GPL/AGPL/SSPL and no unknown licence).

Usage: ``python infra/audit.py [CHECK ...]`` (all checks by default). Exit status 1 when any fails.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import json
import os
import re
import site
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

REVIEWED_LITELLM = "1.110.2"
"""The one LiteLLM release reviewed for this project (docs/contributing.md#dependencies); change it only after
reading the release's diff. 1.82.7 and 1.82.8 were compromised (a credential-stealing ``.pth``)."""

EXPECTED_PTH = {
    "distutils-precedence.pth": "setuptools",
    "_editable_impl_switchboard.pth": "switchboard",
}
"""``*.pth`` files that may be in site-packages, and the distribution that must own each."""

ALLOWED_LICENCES = {
    "0BSD", "Apache-2.0", "BSD", "BSD-2-Clause", "BSD-3-Clause", "CNRI-Python", "HPND", "ISC", "MIT",
    "MIT-0", "MPL-2.0", "PSF-2.0", "Unlicense", "Zlib",
}  # fmt: skip
"""Permissive licences (and MPL-2.0, file-level copyleft that leaves our code alone)."""

COPYLEFT = re.compile(
    r"\b(A?GPL|LGPL|GNU|SSPL|Server Side Public|Commons Clause|BUSL|Business Source|RSAL)\b", re.I
)
"""Licences this project never ships (LGPL too: none is needed, so none is reviewed)."""

_LICENCE_NAMES = {
    "mit": "MIT", "mit license": "MIT", "the mit license (mit)": "MIT", "mit-0": "MIT-0",
    "apache 2.0": "Apache-2.0", "apache-2.0": "Apache-2.0", "apache license 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0", "apache license, version 2.0": "Apache-2.0",
    "bsd": "BSD", "bsd license": "BSD", "bsd-2-clause": "BSD-2-Clause", "bsd-3-clause": "BSD-3-Clause",
    "new bsd license": "BSD-3-Clause", "3-clause bsd license": "BSD-3-Clause",  # protobuf
    "psf-2.0": "PSF-2.0", "psfl": "PSF-2.0",
    "python software foundation license": "PSF-2.0", "mpl-2.0": "MPL-2.0",
    "mozilla public license 2.0 (mpl 2.0)": "MPL-2.0", "isc": "ISC", "isc license": "ISC",
    "isc license (iscl)": "ISC", "unlicense": "Unlicense", "the unlicense (unlicense)": "Unlicense",
    "cnri-python": "CNRI-Python", "0bsd": "0BSD", "zlib": "Zlib", "hpnd": "HPND",
}  # fmt: skip
"""Free-text ``License:`` fields and trove classifiers, mapped to SPDX identifiers."""


@dataclass
class Result:
    name: str
    status: str = "ok"
    """``ok``, ``FAIL`` or ``NOT CHECKED``."""
    summary: str = ""
    findings: list[str] = field(default_factory=list)


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]


def _uv_export(*args: str) -> str:
    done = _run(
        [str(BIN / "uv"), "export", "--frozen", "--no-emit-project", "--format", "requirements-txt", *args]
    )
    if done.returncode != 0:
        raise RuntimeError(f"uv export failed: {done.stderr.strip()}")
    return done.stdout


# --- declared ---------------------------------------------------------------------------------


def check_declared() -> Result:
    result = Result("declared")
    product = _run([str(BIN / "deptry"), ".", "--no-ansi"])
    tests = _run(
        [str(BIN / "deptry"), ".", "--no-ansi", "--exclude", r"\.venv", "--exclude", r"\.git",
         "--extend-exclude", "infra", "--extend-exclude", "libs", "--extend-exclude", "services",
         "--ignore", "DEP002,DEP004"]
    )  # fmt: skip
    for label, done in (("libs/ services/", product), ("tests/ loadtests/", tests)):
        issues = [
            line for line in (done.stdout + done.stderr).splitlines() if re.search(r"\bDEP\d{3}\b", line)
        ]
        result.findings += [f"{label}: {line}" for line in issues]
        if done.returncode != 0 and not issues:
            result.findings.append(f"{label}: deptry exited {done.returncode}: {done.stderr.strip()[-300:]}")
    result.status = "FAIL" if result.findings else "ok"
    result.summary = "deptry: every import declared, every dependency used" if not result.findings else ""
    return result


# --- pins -------------------------------------------------------------------------------------


def check_pins() -> Result:
    result = Result("pins")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = list(project["project"]["dependencies"])
    for group in project.get("dependency-groups", {}).values():
        requirements += [r for r in group if isinstance(r, str)]
    requirements += project["build-system"]["requires"]
    for requirement in requirements:
        if not re.fullmatch(r"[A-Za-z0-9._-]+(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!-]+", requirement.strip()):
            result.findings.append(f"pyproject.toml: {requirement!r} is not pinned exactly (==)")
    declared = [r for r in requirements if re.match(r"litellm(\[|==|$)", r)]
    if declared != [f"litellm=={REVIEWED_LITELLM}"]:
        result.findings.append(
            f"pyproject.toml: litellm must be litellm=={REVIEWED_LITELLM}, found {declared}"
        )
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = [p["version"] for p in lock["package"] if p["name"] == "litellm"]
    if locked != [REVIEWED_LITELLM]:
        result.findings.append(f"uv.lock: litellm {locked}, expected exactly {REVIEWED_LITELLM}")
    unhashed = []
    for package in lock["package"]:
        files = package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else [])
        if any("hash" not in file for file in files):
            unhashed.append(package["name"])
    result.findings += [f"uv.lock: {name} has a file without a hash" for name in unhashed]
    result.status = "FAIL" if result.findings else "ok"
    result.summary = (
        f"{len(requirements)} requirements pinned with ==; litellm {REVIEWED_LITELLM} in pyproject and lock"
    )
    return result


# --- advisories -------------------------------------------------------------------------------


def check_advisories() -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.txt"
        report = Path(tmp) / "audit.json"
        requirements.write_text(_uv_export("--all-groups"))
        done = _run(
            [str(BIN / "pip-audit"), "--disable-pip", "--require-hashes", "-r", str(requirements),
             "--progress-spinner", "off", "--format", "json", "-o", str(report)],
            timeout=900,
        )  # fmt: skip
        data = json.loads(report.read_text()) if report.exists() and report.stat().st_size else None
    error = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return advisory_result(data, error=error, required=os.environ.get("AUDIT_REQUIRE_ADVISORIES") == "1")


def advisory_result(data: dict | None, *, error: str = "", required: bool = False) -> Result:
    """What pip-audit's JSON report says: vulnerabilities fail; packages it could not look up make
    the check NOT CHECKED (FAIL with ``required``), never ok."""
    result = Result("advisories")
    if data is None:
        result.status = "FAIL" if required else "NOT CHECKED"
        result.summary = f"pip-audit could not reach an advisory service: {error}"
        return result
    dependencies = data.get("dependencies", [])
    for dependency in dependencies:
        for vuln in dependency.get("vulns") or []:
            fixes = ", ".join(vuln.get("fix_versions") or []) or "no fixed release"
            result.findings.append(
                f"{dependency['name']} {dependency.get('version')}: {vuln['id']} (fixed in {fixes})"
            )
    skipped = [d for d in dependencies if d.get("skip_reason")]
    audited = len(dependencies) - len(skipped)
    if result.findings:
        result.status = "FAIL"
        result.summary = f"{len(result.findings)} known vulnerabilit(ies) in {audited} audited packages"
    elif skipped:
        result.status = "FAIL" if required else "NOT CHECKED"
        result.summary = (
            f"the advisory service answered for {audited} of {len(dependencies)} locked packages; "
            f"{len(skipped)} not audited (e.g. {skipped[0]['skip_reason']}). PyPI's per-release JSON API and "
            "OSV are not reachable from this network: run `make audit` where they are "
            "(AUDIT_REQUIRE_ADVISORIES=1 makes this a failure)"
        )
    elif not dependencies:
        result.status = "FAIL" if required else "NOT CHECKED"
        result.summary = "pip-audit reported no packages at all"
    else:
        result.summary = f"no known vulnerabilities in {audited} locked packages"
    return result


# --- pth --------------------------------------------------------------------------------------


def _site_dirs() -> list[Path]:
    dirs = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    dirs.update(Path(p) for p in site.getsitepackages())
    return sorted(d for d in dirs if d.is_dir())


def _record_hashes() -> dict[Path, tuple[str, str | None]]:
    """Every file of every installed distribution: path → (distribution, ``sha256=...`` or None)."""
    owners: dict[Path, tuple[str, str | None]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        for entry in dist.files or []:
            owners[Path(str(dist.locate_file(entry))).resolve()] = (
                name.lower().replace("_", "-"),
                f"{entry.hash.mode}={entry.hash.value}" if entry.hash else None,
            )
    return owners


def check_pth(site_dirs: list[Path] | None = None) -> Result:
    result = Result("pth")
    owners = _record_hashes()
    found = []
    for directory in site_dirs or _site_dirs():
        for path in sorted(directory.glob("*.pth")):
            found.append(path.name)
            owner, recorded = owners.get(path.resolve(), (None, None))
            expected = EXPECTED_PTH.get(path.name)
            if expected is None:
                result.findings.append(
                    f"{path}: unexpected .pth file (owned by {owner or 'no distribution'})"
                )
            elif owner != expected:
                result.findings.append(
                    f"{path}: should belong to {expected}, belongs to {owner or 'no distribution'}"
                )
            elif recorded is not None:
                digest = (
                    base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
                )
                if recorded != f"sha256={digest}":
                    result.findings.append(f"{path}: content differs from {owner}'s RECORD")
    result.status = "FAIL" if result.findings else "ok"
    result.summary = f"{len(found)} .pth file(s), all expected: {', '.join(found) or 'none'}"
    return result


# --- licences ---------------------------------------------------------------------------------


def _normalize(name: str) -> str | None:
    return _LICENCE_NAMES.get(name.strip().lower()) or (
        name.strip() if name.strip() in ALLOWED_LICENCES else None
    )


def licence_verdict(meta: metadata.PackageMetadata) -> tuple[bool, str]:
    """``(allowed, what the package declares)`` from ``License-Expression``, ``License`` or classifiers."""
    declared = [meta.get("License-Expression") or "", (meta.get("License") or "").strip()]
    classifiers = [
        c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    shown = (
        "; ".join(d.splitlines()[0][:80] for d in declared if d) or " OR ".join(classifiers) or "no licence"
    )
    for text in declared:  # an SPDX expression, or a one-line licence name (tqdm: "MPL-2.0 AND MIT")
        if text and "\n" not in text and len(text) < 100 and _expression_allowed(text):
            return True, shown
    if classifiers:  # several classifiers: the package is offered under each (dual licensing)
        return any(_normalize(c) for c in classifiers), shown
    if declared[1] and re.search(r"Permission is hereby granted, free of charge", declared[1]):
        return True, "MIT (licence text)"
    return False, shown


def _expression_allowed(expression: str) -> bool:
    """An SPDX-style expression: some OR-alternative whose AND-terms are all allowed."""
    alternatives = [re.split(r"\s+AND\s+", alt.strip("() ")) for alt in re.split(r"\s+OR\s+", expression)]
    return any(all(_normalize(term.strip("() ")) for term in terms) for terms in alternatives)


def _runtime_packages() -> list[tuple[str, str]]:
    from packaging.markers import Marker

    packages = []
    for line in _uv_export("--no-dev", "--no-hashes").splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)\s*(?:;\s*(.+))?$", line)
        if match and (match.group(3) is None or Marker(match.group(3)).evaluate()):
            packages.append((match.group(1), match.group(2)))
    return packages


def check_licences(
    packages: list[tuple[str, str]] | None = None,
    read: Callable[[str], metadata.PackageMetadata] = metadata.metadata,
) -> Result:
    result = Result("licences")
    packages = packages if packages is not None else _runtime_packages()
    counts: dict[str, int] = {}
    for name, version in packages:
        try:
            meta = read(name)
        except metadata.PackageNotFoundError:
            result.findings.append(f"{name} {version}: locked for the runtime but not installed")
            continue
        allowed, shown = licence_verdict(meta)
        if not allowed:
            kind = "copyleft" if COPYLEFT.search(shown) else "not an allowed licence"
            result.findings.append(f"{name} {version}: {kind}: {shown}")
        counts[shown] = counts.get(shown, 0) + 1
    result.status = "FAIL" if result.findings else "ok"
    result.summary = (
        f"{len(packages)} runtime packages, every licence permissive"
        if not result.findings
        else (
            f"{len(result.findings)} of {len(packages)} runtime packages under a licence that is not allowed or unknown"
        )
    )
    return result


CHECKS: dict[str, Callable[[], Result]] = {
    "declared": check_declared,
    "pins": check_pins,
    "advisories": check_advisories,
    "pth": check_pth,
    "licences": check_licences,
}


def main(argv: list[str]) -> int:
    names = argv or list(CHECKS)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        print(f"unknown check(s): {', '.join(unknown)}; choose from {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    failed = False
    for name in names:
        result = CHECKS[name]()
        print(f"audit {result.name:<11} {result.status:<11} {result.summary}")
        for finding in result.findings:
            print(f"    {finding}")
        failed |= result.status == "FAIL"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
