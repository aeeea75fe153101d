"""``POST /v1/messages/{message_id}/feedback`` and the admin route that issues a tenant's app key.

Two ways to authenticate the feedback route (``Authorization: Bearer ...``):

* ``ADMIN_TOKEN`` (as every admin route): any tenant's message; recorded with source ``admin_api``
  unless the body names another (the console passes ``console:<user>``).
* the tenant's **feedback app key** (``sbfk_...``, from ``POST /v1/admin/tenants/{slug}/feedback/app-key``
  or ``switchboard feedback issue-key``): for a tenant's own app (a web chat, a mobile app); only that
  tenant's messages; recorded with source ``tenant_app``. A key that is not the message's tenant's
  gets the same 401 as a wrong key (nobody learns which message ids exist).
"""

from __future__ import annotations

import hmac
import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from switchboard.api.deps import SessionDep, SettingsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.budgets.settings import FeedbackSettings
from switchboard.db.models import Feedback, Message, Tenant, utcnow
from switchboard.feedback.langfuse import exporter_from_settings
from switchboard.feedback.store import (
    COMMENT_MAX_CHARS,
    FeedbackRejected,
    Rating,
    app_key_matches,
    new_app_key,
    record_feedback,
)
from switchboard.observability import get_logger
from switchboard.tenant_settings import set_section, tenant_settings_from

__all__ = ["feedback_router", "feedback_admin_router", "FeedbackIn", "FeedbackPublic", "AppKeyIssued"]

log = get_logger(__name__)

feedback_router = APIRouter(tags=["feedback"])
feedback_admin_router = tenant_admin_router("/feedback", tags=["feedback"])
_bearer = HTTPBearer(auto_error=False)
_UNAUTHORIZED = HTTPException(
    status.HTTP_401_UNAUTHORIZED,
    "missing or invalid bearer token (admin token or the tenant's feedback app key)",
    headers={"WWW-Authenticate": "Bearer"},
)


class FeedbackIn(BaseModel):
    """A customer's or a reviewer's rating of one message."""

    rating: Rating = Field(description="`up` or `down`.")
    comment: str | None = Field(None, max_length=COMMENT_MAX_CHARS, description="Optional free text.")
    source: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Who rates (admin token only; e.g. `console:<user id>`). Default `admin_api`; with an "
        "app key always `tenant_app`. One rating per message and source: a second one replaces it.",
    )


class FeedbackPublic(BaseModel):
    """Stored feedback, joined to the turn and trace of the rated message."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    message_id: uuid.UUID
    conversation_id: uuid.UUID | None
    turn_id: uuid.UUID | None
    trace_id: str | None
    rating: str
    comment: str | None
    source: str
    created_at: datetime
    updated_at: datetime
    exported_at: datetime | None = Field(description="When the score reached Langfuse (null: not exported).")

    @classmethod
    def of(cls, row: Feedback) -> FeedbackPublic:
        return cls.model_validate(row, from_attributes=True)


class AppKeyIssued(BaseModel):
    """A new feedback app key: shown once, only its SHA-256 is stored (the previous key stops working)."""

    app_key: str


@feedback_router.post(
    "/v1/messages/{message_id}/feedback",
    response_model=FeedbackPublic,
    summary="Rate one message (up/down, optional comment)",
    description=(
        "Stores the rating joined to the turn and trace that wrote the message, one per (message, source): "
        "a repeated call replaces the rating. Authenticate with `ADMIN_TOKEN` or the tenant's feedback app "
        "key (`sbfk_...`). Exported to Langfuse as the score `user_feedback` when `LANGFUSE_*` keys are set."
    ),
    responses={401: {"description": "No or wrong token"}, 404: {"description": "No such message"}},
)
async def post_feedback(
    message_id: Annotated[uuid.UUID, Path(description="The rated message's id.")],
    body: FeedbackIn,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> FeedbackPublic:
    if credentials is None:
        raise _UNAUTHORIZED
    token = credentials.credentials
    is_admin = hmac.compare_digest(token.encode(), settings.secret("admin_token").encode())
    message = await session.get(Message, message_id)
    if not is_admin:
        tenant = await session.get(Tenant, message.tenant_id) if message is not None else None
        digest = (
            tenant_settings_from(tenant.settings_extensions).channel(FeedbackSettings).app_key_sha256
            if tenant is not None
            else None
        )
        if not app_key_matches(token, digest):
            log.warning("feedback_rejected_bad_token", path=request.url.path)
            raise _UNAUTHORIZED
    if message is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "message not found")
    source = (body.source or "admin_api") if is_admin else "tenant_app"
    try:
        row = await record_feedback(
            session,
            tenant_id=message.tenant_id,
            message_id=message.id,
            rating=body.rating,
            comment=body.comment,
            source=source,
        )
    except FeedbackRejected as exc:
        raise HTTPException(exc.status_code, str(exc)) from None
    await session.commit()
    exporter = exporter_from_settings(settings)
    if exporter is not None and await exporter.export(row):
        row.exported_at = utcnow()
        session.add(row)
        await session.commit()
    await session.refresh(row)
    return FeedbackPublic.of(row)


@feedback_admin_router.post(
    "/app-key",
    response_model=AppKeyIssued,
    status_code=status.HTTP_201_CREATED,
    summary="Issue the tenant's feedback app key (replaces the previous one)",
)
async def issue_app_key(tenant: TenantDep, session: SessionDep) -> AppKeyIssued:
    key, digest = new_app_key()
    set_section(tenant, "feedback", app_key_sha256=digest)
    session.add(tenant)
    await session.commit()
    log.info("feedback_app_key_issued", tenant_id=str(tenant.id))
    return AppKeyIssued(app_key=key)
