"""CSV import of the business data the tools read: products, orders, stores, meeting slots.

Every row is validated; rejected rows are reported with their line number and reasons. The import
is one transaction: by default a file with any rejected row imports nothing (fix and re-run);
``skip_invalid=True`` imports the valid rows and still reports the rest. Rows are upserts keyed by
SKU (products), order number (orders), name + city (stores), start + resource (slots), so
importing the same file twice changes nothing.

Columns (header row required; unknown product columns become ``attributes``):

* products: ``sku, name, price`` required; ``description, currency, stock, attributes`` (JSON object)
* orders: ``order_number, customer, status, total`` required (``customer``: phone, e-mail or channel
  user id of the customer); ``currency, items`` (``SKU:qty;SKU:qty``), ``carrier, tracking_number,
  placed_at, estimated_delivery`` (ISO 8601)
* stores: ``name, address, city, lat, lon`` required; ``country, phone, opening_hours``
  (JSON object, or ``mon=09:00-18:00;sun=closed``)
* slots: ``starts_at`` required (ISO 8601 with zone; UTC assumed without); ``duration_min`` (30), ``resource``

Files are read like knowledge uploads (:mod:`switchboard.textfiles`): UTF-8, UTF-16 with BOM, or
the Windows-1252 that Excel on Windows exports; ``,`` ``;`` tab or ``|`` separated (sniffed; when
the sniffed dialect's header lacks a required column, comma and semicolon are tried too).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from sqlalchemy import func
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import AuditLog, MeetingSlot, Order, Product, Store, utcnow
from switchboard.db.tenant_scope import TenantScope
from switchboard.observability import get_logger
from switchboard.textfiles import decode_text, looks_like_text, sniff_csv_dialect
from switchboard.tools.business import normalize_order_number, normalize_sku
from switchboard.tools.contracts import UNSTORABLE_PROBLEM, unstorable_field
from switchboard.validation import INT4_MAX, check_datetime_range, has_unstorable_chars

__all__ = ["ImportKind", "IMPORT_KINDS", "RejectedRow", "ImportReport", "import_csv", "MAX_IMPORT_BYTES"]

log = get_logger(__name__)

ImportKind = Literal["products", "orders", "stores", "slots"]
IMPORT_KINDS: tuple[str, ...] = ("products", "orders", "stores", "slots")
MAX_IMPORT_BYTES = 10 * 1024 * 1024
"""Largest CSV accepted (10 MiB)."""
ORDER_STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled", "returned")
_DAY_RE = re.compile(r"^(mon|tue|wed|thu|fri|sat|sun)$")
_HOURS_RE = re.compile(r"^(closed|\d{2}:\d{2}-\d{2}:\d{2}(,\d{2}:\d{2}-\d{2}:\d{2})*)$")


class RejectedRow(BaseModel):
    line: int
    """1-based line number in the file (the header is line 1)."""
    reasons: list[str]


class ImportReport(BaseModel):
    """What an import did."""

    kind: str
    rows: int
    """Data rows read (header excluded)."""
    imported: int
    """Rows written (inserted or updated); 0 when rejected rows made the import atomic-abort."""
    rejected: list[RejectedRow]
    committed: bool


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


class _Row(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True, extra="ignore")

    @field_validator("*", mode="before")
    @classmethod
    def _blanks(cls, value: Any) -> Any:
        return _blank_to_none(value)

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        """What the database cannot store is a rejected row naming the field: text with a NUL or an
        unpaired surrogate (JSON escapes ``\\u0000``, ``\\ud800`` included), a non-finite number in a
        JSON value, a date whose UTC time leaves the years 1-9999."""
        if isinstance(value, datetime):
            check_datetime_range(value)
        return _storable_json(value)


def _storable_json(value: Any) -> Any:
    """``value`` (text, or a JSON column's parsed value) if the database can store it.

    Raises:
        PydanticCustomError: a NUL or an unpaired surrogate (in a key too), or NaN / Infinity.
    """
    if unstorable_field(value) is not None:
        raise PydanticCustomError("unstorable_text", UNSTORABLE_PROBLEM)
    if _non_finite(value):
        raise PydanticCustomError("non_finite_number", "holds a number that is not finite (NaN or Infinity)")
    return value


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(item) for item in value.values())
    if isinstance(value, list):
        return any(_non_finite(item) for item in value)
    return False


class ProductRow(_Row):
    sku: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
    name: str = Field(min_length=1, max_length=300)
    description: str = ""
    price: Decimal = Field(ge=0, max_digits=12, decimal_places=2)
    currency: str = Field("USD", pattern=r"^[A-Za-z]{3}$")
    stock: int = Field(0, ge=0, le=INT4_MAX)
    attributes: dict[str, Any] = Field(default_factory=dict)

    @field_validator("description", mode="before")
    @classmethod
    def _desc(cls, value: Any) -> Any:
        return value or ""

    @field_validator("attributes", mode="before")
    @classmethod
    def _attrs(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("attributes must be a JSON object") from None
        return _storable_json(value)


class OrderRow(_Row):
    order_number: str = Field(min_length=1, max_length=64)
    customer: str = Field(min_length=1, max_length=320)
    status: str
    total: Decimal = Field(ge=0, max_digits=12, decimal_places=2)
    currency: str = Field("USD", pattern=r"^[A-Za-z]{3}$")
    items: list[dict[str, Any]] = Field(default_factory=list)
    carrier: str | None = Field(None, max_length=64)
    tracking_number: str | None = Field(None, max_length=128)
    placed_at: datetime | None = None
    estimated_delivery: datetime | None = None

    @field_validator("status")
    @classmethod
    def _status(cls, value: str) -> str:
        value = value.lower()
        if value not in ORDER_STATUSES:
            raise ValueError(f"status must be one of {', '.join(ORDER_STATUSES)}")
        return value

    @field_validator("items", mode="before")
    @classmethod
    def _items(cls, value: Any) -> Any:
        if value is None:
            return []
        if not isinstance(value, str):
            return value
        items = []
        for part in filter(None, (p.strip() for p in value.split(";"))):
            sku, _, qty = part.partition(":")
            if not sku.strip() or not qty.strip().isdigit() or int(qty) < 1:
                raise ValueError(f"item {part!r}: write SKU:quantity (e.g. FVAM-2050-B:2)")
            items.append({"sku": normalize_sku(sku), "quantity": int(qty)})
        return items

    @field_validator("placed_at", "estimated_delivery")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class StoreRow(_Row):
    name: str = Field(min_length=1, max_length=200)
    address: str = Field(min_length=1, max_length=500)
    city: str = Field(min_length=1, max_length=120)
    country: str | None = Field(None, pattern=r"^[A-Za-z]{2}$")
    phone: str | None = Field(None, max_length=32)
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)
    opening_hours: dict[str, str] = Field(default_factory=dict)

    @field_validator("opening_hours", mode="before")
    @classmethod
    def _hours(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("{"):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError:
                    raise ValueError("opening_hours: invalid JSON") from None
                _storable_json(value)
            else:
                value = dict(part.strip().split("=", 1) for part in text.split(";") if "=" in part)
        hours = {str(k).strip().lower()[:3]: str(v).strip().lower() for k, v in value.items()}
        for day, span in hours.items():
            if not _DAY_RE.match(day) or not _HOURS_RE.match(span):
                raise ValueError(f"opening_hours {day}={span!r}: use mon..sun = HH:MM-HH:MM or closed")
        return hours


class SlotRow(_Row):
    starts_at: datetime
    duration_min: int = Field(30, ge=5, le=480)
    resource: str = Field("default", min_length=1, max_length=120)

    @field_validator("starts_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        return check_datetime_range(value).astimezone(UTC)

    @field_validator("resource", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return value or "default"


_ROW_MODELS: dict[str, type[_Row]] = {
    "products": ProductRow,
    "orders": OrderRow,
    "stores": StoreRow,
    "slots": SlotRow,
}
_PRODUCT_COLUMNS = set(ProductRow.model_fields)


def _key(kind: str, row: Any) -> tuple[Any, ...]:
    if kind == "products":
        return (normalize_sku(row.sku),)
    if kind == "orders":
        return (normalize_order_number(row.order_number),)
    if kind == "stores":
        return (row.name.lower(), row.city.lower())
    return (row.starts_at, row.resource)


def _normalize_customer_ref(value: str) -> str:
    value = value.strip()
    if "@" in value:
        return value.lower()
    digits = re.sub(r"[\s().+-]", "", value)
    return digits if digits.isdigit() else value


def _reason(error: Any, blank: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """One validation error as ``field: message``; a required field left blank reads ``field: is empty``."""
    where = ".".join(str(p) for p in error["loc"]) or "row"
    if error["loc"] and error["loc"][0] in blank:
        return f"{where}: is empty"
    if error.get("input") is None and error["type"] != "missing":
        return f"{where}: is empty"
    return f"{where}: {error['msg']}"


def _records(reader: csv.DictReader[str]) -> Iterator[dict[str, Any]]:
    """The reader's rows; a line the ``csv`` module refuses (a cell over its 131,072-character field
    limit, an unterminated quote at the end) becomes a ``ValueError`` naming the line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise ValueError(f"line {reader.line_num + 1}: {exc}") from None


def _csv_reader(text: str, required: list[str]) -> csv.DictReader[str]:
    """A reader in the sniffed dialect, or comma / semicolon when only those give every required column
    (the sniffer can be misled by a separator inside values); header names stripped and lower-cased."""
    readers = []
    for dialect in (sniff_csv_dialect(text), csv.excel, _SemicolonExcel):
        reader = csv.DictReader(io.StringIO(text), dialect=dialect)
        if reader.fieldnames:
            reader.fieldnames = [name.strip().lower() for name in reader.fieldnames]
            if all(name in reader.fieldnames for name in required):
                return reader
        readers.append(reader)
    return readers[0]


class _SemicolonExcel(csv.excel):
    delimiter = ";"


def parse_rows(kind: str, data: bytes | str) -> tuple[list[tuple[int, Any]], list[RejectedRow], int]:
    """Validate a CSV: ``(valid (line, row) pairs, rejected rows, data row count)``.

    Raises:
        ValueError: unknown kind, not text, too large, no header row, or a header without a
            required column (``missing columns: x, y``).
    """
    if kind not in _ROW_MODELS:
        raise ValueError(f"unknown import kind {kind!r}: use {', '.join(IMPORT_KINDS)}")
    if isinstance(data, bytes):
        if len(data) > MAX_IMPORT_BYTES:
            raise ValueError(f"file too large: {len(data)} bytes (limit {MAX_IMPORT_BYTES})")
        if not looks_like_text(data):
            raise ValueError(
                "the file is not CSV text (a spreadsheet or other binary file? export it as CSV)"
            )
        data = decode_text(data)
    if has_unstorable_chars(data):
        raise ValueError("the file contains NUL or invalid characters (is it a UTF-16 or binary export?)")
    model = _ROW_MODELS[kind]
    required = [name for name, info in model.model_fields.items() if info.is_required()]
    try:
        reader = _csv_reader(data, required)
    except csv.Error as exc:  # the header line itself (e.g. over the field limit)
        raise ValueError(f"line 1: {exc}") from None
    if not reader.fieldnames:
        raise ValueError("the file is empty: a header row is required")
    missing = [name for name in required if name not in reader.fieldnames]
    if missing:
        raise ValueError(
            f"missing columns: {', '.join(missing)} (the header row has: {', '.join(reader.fieldnames)})"
        )
    valid: list[tuple[int, Any]] = []
    rejected: list[RejectedRow] = []
    seen: dict[tuple[Any, ...], int] = {}
    count = 0
    for record in _records(reader):
        count += 1
        line = reader.line_num
        if None in record:
            rejected.append(RejectedRow(line=line, reasons=["more values than header columns"]))
            continue
        # A blank cell means "not given": optional columns take their defaults, and a required
        # column left blank is reported as "is empty".
        blank = {k for k, v in record.items() if isinstance(v, str) and not v.strip()}
        values = {k: v for k, v in record.items() if k not in blank}
        if kind == "products":
            extra = {k: v for k, v in values.items() if k not in _PRODUCT_COLUMNS and v not in (None, "")}
            if extra:
                base = (values.get("attributes") or "").strip()
                try:
                    attrs = json.loads(base) if base else {}
                except json.JSONDecodeError:
                    attrs = None  # left as text: validation reports it
                if isinstance(attrs, dict):
                    values["attributes"] = {**attrs, **extra}
        try:
            row = model.model_validate(values)
        except ValidationError as exc:
            rejected.append(
                RejectedRow(
                    line=line,
                    reasons=[_reason(e, blank) for e in exc.errors()],
                )
            )
            continue
        key = _key(kind, row)
        if key in seen:
            rejected.append(RejectedRow(line=line, reasons=[f"duplicate of line {seen[key]}"]))
            continue
        seen[key] = line
        valid.append((line, row))
    return valid, rejected, count


async def import_csv(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    kind: str,
    data: bytes | str,
    skip_invalid: bool = False,
    actor: str = "admin",
) -> ImportReport:
    """Validate and import one CSV for a tenant inside the caller's transaction.

    With rejected rows and ``skip_invalid=False`` nothing is written (``committed=False``); the
    caller's transaction is left untouched. Otherwise every valid row is upserted and one
    ``audit_logs`` row records the import.

    Raises:
        ValueError: see :func:`parse_rows`.
    """
    valid, rejected, count = parse_rows(kind, data)
    if rejected and not skip_invalid:
        log.info("import_rejected", tenant_id=str(tenant_id), kind=kind, rows=count, rejected=len(rejected))
        return ImportReport(kind=kind, rows=count, imported=0, rejected=rejected, committed=False)
    scope = TenantScope(session, tenant_id)
    for _line, row in valid:
        await _UPSERT[kind](scope, row)
    session.add(
        AuditLog(
            tenant_id=tenant_id,
            actor=actor,
            action=f"import_{kind}",
            target_type=kind,
            details={"rows": count, "imported": len(valid), "rejected": len(rejected)},
        )
    )
    await session.flush()
    log.info("import_done", tenant_id=str(tenant_id), kind=kind, imported=len(valid), rejected=len(rejected))
    return ImportReport(kind=kind, rows=count, imported=len(valid), rejected=rejected, committed=True)


async def _upsert_product(scope: TenantScope, row: ProductRow) -> None:
    sku = normalize_sku(row.sku)
    product = await scope.first(Product, Product.sku == sku)
    if product is None:
        product = scope.add(Product(tenant_id=scope.tenant_id, sku=sku, name=row.name, price=row.price))
    product.name, product.description, product.price = row.name, row.description, row.price
    product.currency, product.stock, product.attributes = row.currency.upper(), row.stock, row.attributes
    product.is_active, product.updated_at = True, utcnow()


async def _upsert_order(scope: TenantScope, row: OrderRow) -> None:
    number = normalize_order_number(row.order_number)
    order = await scope.first(Order, Order.order_number == number)
    if order is None:
        order = scope.add(
            Order(tenant_id=scope.tenant_id, order_number=number, status=row.status, total=row.total)
        )
    order.customer_ref = _normalize_customer_ref(row.customer)
    order.status, order.total, order.currency = row.status, row.total, row.currency.upper()
    order.items, order.carrier, order.tracking_number = row.items, row.carrier, row.tracking_number
    order.placed_at, order.estimated_delivery, order.updated_at = (
        row.placed_at,
        row.estimated_delivery,
        utcnow(),
    )


async def _upsert_store(scope: TenantScope, row: StoreRow) -> None:
    store = await scope.first(
        Store, func.lower(Store.name) == row.name.lower(), func.lower(Store.city) == row.city.lower()
    )
    if store is None:
        store = scope.add(
            Store(
                tenant_id=scope.tenant_id,
                name=row.name,
                address=row.address,
                city=row.city,
                lat=row.lat,
                lon=row.lon,
            )
        )
    store.address, store.city, store.lat, store.lon = row.address, row.city, row.lat, row.lon
    store.country = row.country.upper() if row.country else None
    store.phone, store.opening_hours = row.phone, row.opening_hours


async def _upsert_slot(scope: TenantScope, row: SlotRow) -> None:
    slot = await scope.first(
        MeetingSlot, MeetingSlot.starts_at == row.starts_at, MeetingSlot.resource == row.resource
    )
    if slot is None:
        slot = scope.add(
            MeetingSlot(tenant_id=scope.tenant_id, starts_at=row.starts_at, resource=row.resource)
        )
    slot.duration_min = row.duration_min


_UPSERT = {
    "products": _upsert_product,
    "orders": _upsert_order,
    "stores": _upsert_store,
    "slots": _upsert_slot,
}
