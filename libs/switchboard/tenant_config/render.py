"""The settings document as YAML or JSON text, and back (``switchboard tenant settings show|edit``)."""

from __future__ import annotations

import json
from typing import Any, Literal

import yaml

from switchboard.tenant_config.document import Problem, SettingsInvalid

__all__ = ["Format", "dump_document", "load_document", "EDIT_HEADER"]

Format = Literal["yaml", "json"]

EDIT_HEADER = """\
# Settings of tenant {slug}. Save and close the editor to apply; every section is validated first.
# Secrets are write-only: "set" keeps the stored key, a new value replaces it (encrypted on the
# way in), null removes it. A value equal to its default is not stored (it follows the default).
# Sections: {sections}
"""


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks (prompts stay readable); keys in document order."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump_document(document: dict[str, Any], fmt: Format = "yaml") -> str:
    """``document`` as text in ``fmt``."""
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def load_document(text: str, fmt: Format = "yaml") -> dict[str, Any]:
    """Parse an edited document (YAML is a superset of JSON, so ``yaml`` reads both).

    Raises:
        SettingsInvalid: not YAML/JSON, or not a mapping (the line and column are in the message).
    """
    try:
        data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SettingsInvalid([Problem("(document)", f"not valid {fmt.upper()}: {exc}")]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsInvalid([Problem("(document)", "must be a mapping of sections (agent:, llm:, ...)")])
    return data
