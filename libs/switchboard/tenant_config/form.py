"""The settings document as an HTML form and back: one input per setting, derived from the section models.

:func:`form_sections` describes every section's fields (kind, value, limits, help) for the console's
agent settings page; :func:`document_from_form` turns the submitted form back into a public document
(:mod:`.document`) that :func:`~switchboard.tenant_config.service.save_settings` validates and stores.

Form names: ``<section>.<setting>``; a list of models (``llm.deployments``) is rows
``<section>.<setting>.<row>.<field>`` (a row whose required fields are all empty is dropped: the
empty last row adds a deployment). A secret is a password input: empty keeps the stored key,
``<name>.remove`` (a checkbox) removes it; so does ``<setting>.<row>.remove`` for a whole row. A nested
model (``guardrails.input``) is a group of inputs ``<section>.<setting>.<field>``. Booleans are checkboxes (an absent box is false); lists of
strings are one per line; an empty optional number or text is ``null`` (its default).
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from inspect import isclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from switchboard.tenant_config.document import SECRET_NOT_SET, SECRET_SET, SECRET_SUFFIX, all_sections

__all__ = [
    "FormField",
    "FormSection",
    "form_sections",
    "document_from_form",
    "LONG_TEXT_FIELDS",
    "REMOVE_ROW",
]

Kind = Literal["text", "textarea", "number", "checkbox", "select", "lines", "secret", "rows", "json", "group"]
LONG_TEXT_FIELDS = frozenset({"instructions", "system_prompt"})
EXTRA_ROWS = 1
"""Empty rows offered under a list of models (to add one)."""
REMOVE_ROW = "remove"
"""A row's checkbox (``llm.deployments.0.remove``) that drops it on save."""


@dataclass
class FormField:
    """One input of the form."""

    name: str
    """Form name (``agent.name``, ``llm.deployments.0.model``)."""
    key: str
    """The setting's name in its section (``name``, ``api_key``)."""
    kind: Kind
    value: Any
    label: str
    help: str = ""
    required: bool = False
    options: list[str] = field(default_factory=list)
    step: str = "any"
    minimum: Any = None
    maximum: Any = None
    rows: list[list[FormField]] = field(default_factory=list)
    """For ``rows``: one list of fields per item (the last ones empty)."""
    children: list[FormField] = field(default_factory=list)
    """For ``group`` (a nested settings model such as ``guardrails.input``): its own fields."""


@dataclass
class FormSection:
    name: str
    title: str
    fields: list[FormField]


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), True
    return annotation, False


def _limits(info: FieldInfo) -> tuple[Any, Any]:
    low = high = None
    for meta in info.metadata:
        low = getattr(meta, "ge", None) if getattr(meta, "ge", None) is not None else low
        low = getattr(meta, "gt", None) if low is None and getattr(meta, "gt", None) is not None else low
        high = getattr(meta, "le", None) if getattr(meta, "le", None) is not None else high
    return low, high


def _help(info: FieldInfo) -> str:
    return (info.description or "").strip()


def _field(prefix: str, key: str, info: FieldInfo, value: Any, model: type[BaseModel]) -> FormField:
    annotation, optional = _strip_optional(info.annotation)
    name = f"{prefix}.{key}"
    label = key.replace("_", " ")
    low, high = _limits(info)
    common = {"name": name, "key": key, "label": label, "help": _help(info), "required": info.is_required()}
    if key.endswith(SECRET_SUFFIX):
        public = key[: -len(SECRET_SUFFIX)]
        return FormField(
            **{**common, "name": f"{prefix}.{public}", "key": public, "label": public.replace("_", " ")},
            kind="secret",
            value=SECRET_SET if value else SECRET_NOT_SET,
        )
    if annotation is bool:
        return FormField(**common, kind="checkbox", value=bool(value))
    if get_origin(annotation) is Literal:
        return FormField(**common, kind="select", value=value, options=[str(a) for a in get_args(annotation)])
    if annotation in (int, float) or getattr(annotation, "__name__", "") in ("StrictInt",):
        return FormField(
            **common,
            kind="number",
            value=value,
            step="1" if annotation is int else "any",
            minimum=low,
            maximum=high,
        )
    if get_origin(annotation) is list:
        (item,) = get_args(annotation) or (str,)
        if isclass(item) and issubclass(item, BaseModel):
            items = list(value or [])
            rows = [_row(f"{name}.{i}", item, v) for i, v in enumerate(items)]
            rows += [_row(f"{name}.{len(items) + n}", item, {}) for n in range(EXTRA_ROWS)]
            return FormField(**common, kind="rows", value=None, rows=rows)
        return FormField(**common, kind="lines", value="\n".join(str(v) for v in value or []))
    if isclass(annotation) and issubclass(annotation, BaseModel):
        # a nested model (guardrails.input): its own inputs, named <name>.<field>
        values = value.model_dump(mode="json") if isinstance(value, BaseModel) else dict(value or {})
        return FormField(**common, kind="group", value=None, children=_row(name, annotation, values))
    if get_origin(annotation) is dict or annotation is dict:
        # a free-form mapping: edited as a JSON object, validated on save
        shown = value
        return FormField(
            **common,
            kind="json",
            value=json.dumps(shown, indent=2, ensure_ascii=False) if shown is not None else "",
        )
    text = "" if value is None else str(value)
    long = key in LONG_TEXT_FIELDS or key.endswith("_reply") or len(text) > 90
    return FormField(**common, kind="textarea" if long else "text", value=text)


def _row(prefix: str, model: type[BaseModel], values: Mapping[str, Any]) -> list[FormField]:
    out = []
    for key, info in model.model_fields.items():
        value = values.get(key, None if info.is_required() else info.get_default(call_default_factory=True))
        if key.endswith(SECRET_SUFFIX) and not value and values.get(key[: -len(SECRET_SUFFIX)]) == SECRET_SET:
            value = SECRET_SET  # public shape (a nested group): the key is stored, kept unless replaced
        out.append(_field(prefix, key, info, value, model))
    return out


def form_sections(effective: Mapping[str, Mapping[str, Any]], stored: Mapping[str, Any]) -> list[FormSection]:
    """Every section's inputs, filled from the settings in force (``effective``: public shape) and the
    stored section (for secrets: only whether a key is stored)."""
    out = []
    for name, model in all_sections().items():
        values = dict(effective.get(name) or {})
        stored_section = stored.get(name) if isinstance(stored.get(name), Mapping) else {}
        fields = []
        for key, info in model.model_fields.items():
            if key.endswith(SECRET_SUFFIX):
                value = (stored_section or {}).get(key)
            elif _is_model_list(info.annotation) and key in (stored_section or {}):
                value = _with_secrets(values.get(key), (stored_section or {}).get(key))
            else:
                value = values.get(key)
            fields.append(_field(name, key, info, value, model))
        out.append(FormSection(name=name, title=name.replace("_", " "), fields=fields))
    return out


def _is_model_list(annotation: Any) -> bool:
    """Whether a setting is a list of models (rows that may hold a secret), not a list of plain values
    (holidays, websites, button ids)."""
    kind = _strip_optional(annotation)[0]
    args = get_args(kind)
    return (
        get_origin(kind) is list
        and bool(args)
        and isinstance(args[0], type)
        and issubclass(args[0], BaseModel)
    )


def _with_secrets(public_items: Any, stored_items: Any) -> list[dict[str, Any]]:
    """Rows of a list of models in stored shape (so a row's secret shows set / not set)."""
    stored_by_id = {i.get("id"): i for i in stored_items or [] if isinstance(i, Mapping)}
    rows = []
    for item in public_items or []:
        row = dict(item)
        for key, value in list(row.items()):
            if value in (SECRET_SET, SECRET_NOT_SET):
                row.pop(key)
                row[key + SECRET_SUFFIX] = (stored_by_id.get(item.get("id")) or {}).get(key + SECRET_SUFFIX)
        rows.append(row)
    return rows


def _coerce(kind: Kind, raw: str | None, present: bool) -> Any:
    if kind == "checkbox":
        return present
    if raw is None:
        return None
    text = raw.replace("\r\n", "\n")
    if kind == "lines":
        return [line.strip() for line in text.split("\n") if line.strip()]
    if kind == "number":
        text = text.strip()
        if not text:
            return None
        try:
            number = float(text)
        except ValueError:
            return text  # the validator names it
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if kind in ("text", "select"):
        return text.strip() or None
    if kind == "json":
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text  # not JSON: the section's validator names the field
    return text if text.strip() else None  # textarea: kept as written


def _read(fields: list[FormField], form: Mapping[str, str], model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.kind == "secret":
            given = (form.get(f.name) or "").strip()
            if form.get(f"{f.name}.remove"):
                out[f.key] = None
            elif given:
                out[f.key] = given
            elif f.value == SECRET_SET:
                out[f.key] = SECRET_SET
            continue
        if f.kind == "group":
            nested = _strip_optional(model.model_fields[f.key].annotation)[0]
            out[f.key] = {k: v for k, v in _read(f.children, form, nested).items() if v is not None}
            continue
        if f.kind == "rows":
            info = model.model_fields[f.key]
            item_model = get_args(_strip_optional(info.annotation)[0])[0]
            items = []
            for index, row in enumerate(f.rows):
                if form.get(f"{f.name}.{index}.{REMOVE_ROW}"):
                    continue  # "remove this row" ticked
                values = _read(row, form, item_model)
                # a select always posts a value: an empty row is one whose typed required fields are empty
                required = [r.key for r in row if r.required and r.kind != "select"]
                if required and all(values.get(k) in (None, "") for k in required):
                    continue  # an empty row: nothing to add
                items.append({k: v for k, v in values.items() if v is not None})
            out[f.key] = items
            continue
        value = _coerce(f.kind, form.get(f.name), f.name in form)
        if value is not None or f.kind == "checkbox":
            out[f.key] = value
    return out


def document_from_form(sections: list[FormSection], form: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The public document of a submitted form (every section of ``sections``)."""
    models = all_sections()
    return {s.name: _read(s.fields, form, models[s.name]) for s in sections}
