"""Column helpers shared by every table: ids, UTC timestamps, JSONB and the tenant mixin."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    """Timezone-aware now in UTC; every stored time is UTC."""
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    return uuid.uuid4()


def id_field() -> Any:
    """UUID primary key generated in Python (so ids are known before flush)."""
    return Field(default_factory=new_id, primary_key=True)


def created_at_field() -> Any:
    return Field(
        default_factory=utcnow,
        sa_type=DateTime(timezone=True),
        sa_column_kwargs={"server_default": text("now()"), "nullable": False},
    )


def updated_at_field() -> Any:
    return Field(
        default_factory=utcnow,
        sa_type=DateTime(timezone=True),
        sa_column_kwargs={"server_default": text("now()"), "nullable": False, "onupdate": utcnow},
    )


def optional_time_field(**kwargs: Any) -> Any:
    return Field(default=None, sa_type=DateTime(timezone=True), **kwargs)


def jsonb_dict_field() -> Any:
    """A non-null JSONB object column defaulting to ``{}``."""
    return Field(
        default_factory=dict, sa_column=Column(JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    )


def jsonb_list_field() -> Any:
    """A non-null JSONB array column defaulting to ``[]``."""
    return Field(
        default_factory=list, sa_column=Column(JSONB, nullable=False, server_default=text("'[]'::jsonb"))
    )


def jsonb_optional_field() -> Any:
    """A nullable JSONB column."""
    return Field(default=None, sa_column=Column(JSONB, nullable=True))


class TenantOwned(SQLModel):
    """Mixin for every tenant-scoped table: a non-null, indexed ``tenant_id`` foreign key."""

    tenant_id: uuid.UUID = Field(foreign_key="tenants.id", index=True, nullable=False, ondelete="CASCADE")
    """Owning tenant. Set from the authenticated context (channel account, admin token), never from a model."""
