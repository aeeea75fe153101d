"""MkDocs hook: adds the reference pages generated from the code (``reference.py``) to the site."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _reference():
    path = Path(__file__).with_name("reference.py")
    spec = importlib.util.spec_from_file_location("switchboard_docs_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def on_files(files, config):
    """Add the reference pages (configuration, tenant settings, CLI, HTTP API, event types), rendered
    now from the code."""
    from mkdocs.structure.files import File

    reference = _reference()
    for src_uri, render in (
        (reference.CONFIGURATION_PAGE, reference.configuration_markdown),
        (reference.TENANT_SETTINGS_PAGE, reference.tenant_settings_markdown),
        (reference.CLI_PAGE, reference.cli_markdown),
        (reference.HTTP_API_PAGE, reference.http_api_markdown),
        (reference.EVENTS_PAGE, reference.events_markdown),
    ):
        files.append(File.generated(config, src_uri, content=render()))
    return files
