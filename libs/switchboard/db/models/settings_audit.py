"""The audit trail of tenant settings changes (migration ``0014_settings_audit``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field

from switchboard.db.models.base import TenantOwned, created_at_field, id_field, jsonb_dict_field


class SettingsChange(TenantOwned, table=True):
    """One saved change of a tenant's ``settings_extensions``: who, when, and what it was before and after.

    ``before`` / ``after`` hold only the sections that changed, in their public shape (what
    ``switchboard tenant settings show`` prints): secrets appear as ``"set"`` / ``"not set"``
    (``"set (changed)"`` when a new key replaced an old one), never as a token or a key.
    """

    __tablename__ = "settings_changes"
    __table_args__ = (Index("ix_settings_changes_tenant_created", "tenant_id", "created_at"),)

    id: uuid.UUID = id_field()
    actor: str = Field(max_length=200)
    """``cli:<os user>``, ``api:admin-token``, ``console:<user email>``."""
    source: str = Field(max_length=16)
    """``cli``, ``api`` or ``console``."""
    sections: list[str] = Field(default_factory=list, sa_column=Column(JSONB, nullable=False))
    """Names of the sections that changed (``["agent", "llm"]``)."""
    changed_paths: list[str] = Field(default_factory=list, sa_column=Column(JSONB, nullable=False))
    """Dotted paths of the values that changed (``agent.name``, ``llm.deployments``)."""
    before: dict[str, Any] = jsonb_dict_field()
    after: dict[str, Any] = jsonb_dict_field()
    created_at: datetime = created_at_field()
