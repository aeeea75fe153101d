"""A tenant's settings as one document people read and write, with secrets write-only.

The **public shape** is ``settings_extensions`` as a person sees it: one mapping per section (core
sections and every registered channel section), where each stored secret ``<name>_encrypted`` (a
:class:`~switchboard.crypto.CredentialCipher` token of ``{"api_key": ...}``) appears as ``<name>``
with the value ``"set"`` or ``"not set"``. Writing ``<name>``:

* a new key (any other string): encrypted on the way in (``ENCRYPTION_KEY``);
* ``"set"``: keep the stored key (an error when none is stored), unless the save changes the address
  the key was given for (a deployment's ``provider`` or ``api_base``, the embedding's base URL or
  provider): then the stored key is dropped, and only a new key in the same save goes with the new
  address;
* ``null``, ``""`` or ``"not set"`` (or leaving it out): remove it.

Writing ``<name>_encrypted`` directly is refused: nobody pastes a token. Deployments in
``llm.deployments`` keep their stored key by ``id``.

:func:`prepare_settings` turns a whole new public document into the ``settings_extensions`` to store:
each section is validated (with the tenant's localized defaults, see
:func:`switchboard.tenant_settings.localized_defaults`) and only what differs from the defaults is
kept, so a default changed later reaches every tenant that did not choose its own value (a fixed
customer text equal to its built-in default in any language counts as the default).
"""

from __future__ import annotations

import copy
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from inspect import isclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from switchboard.crypto import CredentialCipher
from switchboard.errors import SwitchboardError
from switchboard.i18n import N_, SUPPORTED_LANGUAGES, gettext
from switchboard.i18n.validation import localized
from switchboard.llm.keys import check_api_key
from switchboard.observability import get_logger
from switchboard.tenant_settings import (
    CORE_SECTIONS,
    LocaleSettings,
    channel_sections,
    localized_defaults,
    tenant_settings_from,
)

__all__ = [
    "SECRET_SET",
    "SECRET_NOT_SET",
    "SECRET_CHANGED",
    "SettingsInvalid",
    "Problem",
    "all_sections",
    "public_view",
    "effective_document",
    "overrides_document",
    "prepare_settings",
    "merge_patch",
    "set_path",
    "redacted_sections",
]

log = get_logger(__name__)

SECRET_SUFFIX = "_encrypted"
SECRET_SET = "set"
SECRET_NOT_SET = "not set"
SECRET_CHANGED = "set (changed)"
"""In an audit row's ``after``: a new key replaced the stored one."""
_SECRET_PAYLOAD_KEY = "api_key"
"""Every stored secret is a token of ``{"api_key": ...}`` (LLM deployments, the embedding key)."""


@dataclass(frozen=True)
class Problem:
    """One reason a document was refused: where (``llm.deployments[0].priority``) and why."""

    path: str
    message: str
    """English (the admin API and the CLI show it)."""
    error_type: str | None = None
    """pydantic's error ``type`` when pydantic found it (:mod:`switchboard.i18n.validation`)."""
    params: Mapping[str, str] = field(default_factory=dict)
    """pydantic's error ``ctx``, as text."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def text(self, language: str) -> str:
        """The message in ``language`` (the console's): pydantic's through
        :func:`switchboard.i18n.validation.localized`, ours through the catalog (a message that is
        not a msgid stays English)."""
        if self.error_type is None:
            return gettext(language, self.message)
        return localized({"type": self.error_type, "msg": self.message}, language, params=self.params)


class SettingsInvalid(SwitchboardError, ValueError):
    """A settings document that cannot be stored (nothing changed); ``problems`` lists each reason."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("invalid settings: " + "; ".join(str(p) for p in problems))


def all_sections() -> dict[str, type[BaseModel]]:
    """Every section by name: the core ones, then the registered channel sections."""
    return {**CORE_SECTIONS, **channel_sections()}


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """``(model, is_list)`` when a field holds a model or a list of models, else ``(None, False)``."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            if arg is not type(None):
                found = _nested(arg)
                if found[0] is not None:
                    return found
        return None, False
    if origin is list:
        args = get_args(annotation)
        if args and isclass(args[0]) and issubclass(args[0], BaseModel):
            return args[0], True
        return None, False
    if isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def public_view(
    model: type[BaseModel], data: Mapping[str, Any], before: Mapping[str, Any] | None = None
) -> dict:
    """A section in stored shape (or a validated dump) → public shape (secrets as ``"set"``/``"not set"``).

    With ``before`` (the stored shape it replaced), a secret whose token changed shows as
    ``"set (changed)"`` (audit rows).
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if key.endswith(SECRET_SUFFIX) and field is not None:
            shown = SECRET_SET if value else SECRET_NOT_SET
            if value and before is not None and before.get(key) and before.get(key) != value:
                shown = SECRET_CHANGED
            out[key[: -len(SECRET_SUFFIX)]] = shown
            continue
        sub, is_list = _nested(field.annotation) if field is not None else (None, False)
        if sub is not None and is_list and isinstance(value, list):
            olds = _by_id((before or {}).get(key)) if before is not None else None
            out[key] = [
                public_view(sub, item, None if olds is None else olds.get(item.get("id"), {}))
                if isinstance(item, Mapping)
                else item
                for item in value
            ]
        elif sub is not None and isinstance(value, Mapping):
            out[key] = public_view(sub, value, None if before is None else (before.get(key) or {}))
        else:
            out[key] = copy.deepcopy(value)
    return out


def _by_id(items: Any) -> dict[Any, Mapping[str, Any]]:
    return {item.get("id"): item for item in items or [] if isinstance(item, Mapping) and item.get("id")}


def effective_document(extensions: Mapping[str, Any] | None) -> dict[str, dict]:
    """Every section with its defaults filled in (localized), in public shape: what is in force."""
    settings = tenant_settings_from(extensions)
    return {
        name: public_view(model, getattr(settings, name).model_dump(mode="json"))
        for name, model in all_sections().items()
    }


def overrides_document(extensions: Mapping[str, Any] | None) -> dict[str, dict]:
    """Only what the tenant stored, in public shape (sections without overrides left out)."""
    stored = dict(extensions or {})
    return {
        name: public_view(model, stored[name])
        for name, model in all_sections().items()
        if isinstance(stored.get(name), Mapping) and stored[name]
    }


def _moved(model: type[BaseModel], stored: Mapping[str, Any], public: Mapping[str, Any]) -> bool:
    """Whether the address a stored key was given for (the model's ``key_address``: provider and base
    URL) differs in ``public``: then "keep the stored key" keeps nothing, so a key never follows a
    changed ``api_base`` or provider to a new address (a new key in the same save is stored as usual)."""
    address = getattr(model, "key_address", None)
    return address is not None and address(stored) != address(public)


def _to_stored(
    model: type[BaseModel],
    public: Any,
    stored: Mapping[str, Any],
    path: str,
    cipher: Callable[[], CredentialCipher],
    problems: list[Problem],
) -> Any:
    if not isinstance(public, Mapping):
        problems.append(Problem(path, f"must be a mapping of settings, not {type(public).__name__}"))
        return {}
    result: dict[str, Any] = {}
    for key, value in public.items():
        where = f"{path}.{key}"
        if not isinstance(key, str):
            problems.append(Problem(where, N_("setting names are strings")))
            continue
        if key.endswith(SECRET_SUFFIX) and key in model.model_fields:
            plain = key[: -len(SECRET_SUFFIX)]
            problems.append(
                Problem(where, f"write {plain!r} (the key itself, encrypted on the way in), not a token")
            )
            continue
        secret_key = key + SECRET_SUFFIX
        if secret_key in model.model_fields:
            if value in (SECRET_SET, SECRET_CHANGED):
                if not stored.get(secret_key):
                    problems.append(Problem(where, N_("no key is stored: give the key, or null")))
                elif _moved(model, stored, public):
                    log.info("stored_key_dropped", setting=where, reason="address_changed")
                else:
                    result[secret_key] = stored[secret_key]
            elif value is None or value in ("", SECRET_NOT_SET):
                pass  # removed
            elif isinstance(value, str):
                try:
                    key_text = check_api_key(value, field=key)
                except ValueError as exc:
                    problems.append(Problem(where, str(exc)))
                else:
                    result[secret_key] = cipher().encrypt({_SECRET_PAYLOAD_KEY: key_text})
            else:
                problems.append(Problem(where, N_("a key is a string")))
            continue
        field = model.model_fields.get(key)
        if field is None:
            known = sorted(
                name[: -len(SECRET_SUFFIX)] if name.endswith(SECRET_SUFFIX) else name
                for name in model.model_fields
            )
            problems.append(Problem(where, f"unknown setting (known: {', '.join(known)})"))
            continue
        sub, is_list = _nested(field.annotation)
        if sub is not None and is_list and isinstance(value, list):
            olds = _by_id(stored.get(key))
            result[key] = [
                _to_stored(sub, item, olds.get(item.get("id"), {}), f"{where}[{index}]", cipher, problems)
                if isinstance(item, Mapping)
                else item
                for index, item in enumerate(value)
            ]
        elif sub is not None and isinstance(value, Mapping):
            result[key] = _to_stored(sub, value, stored.get(key) or {}, where, cipher, problems)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _minimal(model: type[BaseModel], validated: BaseModel) -> dict[str, Any]:
    """What differs from the defaults. A translatable text equal to its built-in default in any
    language is not stored (so switching ``locale.language`` in the same edit switches it too)."""
    kept = validated.model_dump(mode="json", exclude_defaults=True)
    full = validated.model_dump(mode="json")
    builtin: dict[str, set[str]] = {}
    for language in SUPPORTED_LANGUAGES:
        for name, text in localized_defaults(model, language).items():
            builtin.setdefault(name, set()).add(text)
    for name, texts in builtin.items():
        if full.get(name) in texts:
            kept.pop(name, None)
        else:
            kept[name] = full.get(name)
    return kept


def _problems_of(exc: ValidationError, section: str) -> list[Problem]:
    found = []
    for error in exc.errors():
        location = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.get("loc", ()))
        params = {key: str(value) for key, value in (error.get("ctx") or {}).items()}
        found.append(Problem(f"{section}{location}", str(error.get("msg")), str(error.get("type")), params))
    return found


def prepare_settings(
    extensions: Mapping[str, Any] | None,
    document: Mapping[str, Any],
    *,
    cipher: Callable[[], CredentialCipher],
) -> dict[str, Any]:
    """The ``settings_extensions`` to store for a new public ``document`` (every section it names).

    Sections ``document`` does not name keep what is stored; a section given as ``{}`` or ``null``
    goes back to its defaults. Top-level keys that are not sections are refused.

    Args:
        extensions: what the tenant stores now.
        document: ``{section: {setting: value}}`` in public shape.
        cipher: called only when a new key must be encrypted.

    Raises:
        SettingsInvalid: every problem found, with its path (nothing is returned).
    """
    stored = copy.deepcopy(dict(extensions or {}))
    sections = all_sections()
    problems: list[Problem] = []
    if not isinstance(document, Mapping):
        raise SettingsInvalid([Problem("(document)", N_("must be a mapping of sections"))])
    for name in document:
        if name not in sections:
            problems.append(Problem(str(name), f"unknown section (known: {', '.join(sections)})"))
    locale_public = document.get("locale", stored.get("locale")) or {}
    try:
        language = LocaleSettings.model_validate(locale_public).language
    except ValidationError:
        language = LocaleSettings().language  # reported with the section below
    result = {key: value for key, value in stored.items()}
    for name, model in sections.items():
        if name not in document:
            continue
        public = document[name] if document[name] is not None else {}
        old = stored.get(name) if isinstance(stored.get(name), Mapping) else {}
        before = len(problems)
        candidate = _to_stored(model, public, old or {}, name, cipher, problems)
        if len(problems) > before:
            continue
        try:
            validated = model.model_validate({**localized_defaults(model, language), **candidate})
        except ValidationError as exc:
            problems.extend(_problems_of(exc, name))
            continue
        minimal = _minimal(model, validated)
        if minimal:
            result[name] = minimal
        else:
            result.pop(name, None)
    if problems:
        raise SettingsInvalid(problems)
    return result


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """JSON merge patch (RFC 7396): mappings merge, ``null`` removes a key, anything else replaces."""
    merged = copy.deepcopy(dict(target))
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


_SEGMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<id>[^\]]+)\])?$")


def set_path(document: dict[str, Any], path: str, value: Any) -> None:
    """Set ``section.setting`` (or ``llm.deployments[<id>].api_key``) in a public document, in place.

    A list item is named by its ``id``. ``value`` ``None`` removes the setting (back to its default).

    Raises:
        SettingsInvalid: a malformed path, or a list item with no such id.
    """
    parts = path.split(".")
    if len(parts) < 2:
        raise SettingsInvalid([Problem(path, N_("write section.setting, e.g. agent.name"))])
    node: Any = document
    for index, part in enumerate(parts):
        match = _SEGMENT.match(part)
        if match is None:
            raise SettingsInvalid([Problem(path, f"malformed part {part!r}")])
        name, item_id = match.group("name"), match.group("id")
        last = index == len(parts) - 1
        if item_id is not None:
            items = node.get(name)
            found = next(
                (it for it in items or [] if isinstance(it, dict) and str(it.get("id")) == item_id), None
            )
            if found is None:
                raise SettingsInvalid([Problem(path, f"no item with id {item_id!r} in {name}")])
            if last:
                raise SettingsInvalid([Problem(path, N_("name a setting of the item, e.g. [id].model"))])
            node = found
            continue
        if last:
            if value is None:
                node.pop(name, None)
            else:
                node[name] = value
        else:
            child = node.get(name)
            if not isinstance(child, dict):
                child = {}
                node[name] = child
            node = child


def redacted_sections(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[list[str], list[str], dict[str, Any], dict[str, Any]]:
    """``(sections, changed_paths, before_public, after_public)`` of two stored ``settings_extensions``.

    Only sections that differ are included; secrets are redacted (``"set (changed)"`` when a new
    key replaced an old one).
    """
    sections = all_sections()
    changed = [name for name in sections if (before.get(name) or {}) != (after.get(name) or {})]
    old_public = {name: public_view(sections[name], before.get(name) or {}) for name in changed}
    new_public = {
        name: public_view(sections[name], after.get(name) or {}, before.get(name) or {}) for name in changed
    }
    paths: list[str] = []
    for name in changed:
        old, new = before.get(name) or {}, after.get(name) or {}
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                shown = key[: -len(SECRET_SUFFIX)] if key.endswith(SECRET_SUFFIX) else key
                paths.append(f"{name}.{shown}")
    return changed, paths, old_public, new_public
