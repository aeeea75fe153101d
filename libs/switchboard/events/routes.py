"""Admin API: ``/v1/admin/tenants/{slug}/webhooks`` (endpoints, their deliveries); :data:`event_webhooks_router` documents every event's payload in
the OpenAPI ``webhooks`` section (what a tenant's endpoint receives)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field
from sqlmodel import col, select

from switchboard.api.deps import SessionDep, SettingsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.crypto import CredentialCipher
from switchboard.db.models import WebhookDelivery, WebhookEndpoint
from switchboard.egress import EgressPolicy
from switchboard.events.endpoints import (
    ROTATION_OVERLAP_MAX_S,
    EndpointRefused,
    create_endpoint,
    list_endpoints,
    previous_secret_until,
    rotate_secret,
    set_endpoint_active,
)
from switchboard.events.schemas import EVENT_TYPES, EventEnvelope, EventType
from switchboard.events.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    STANDARD_SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Scheme,
)

__all__ = ["event_webhooks_router", "webhooks_router"]

webhooks_router = tenant_admin_router("/webhooks", tags=["event webhooks"])


class EndpointCreate(BaseModel):
    """A new endpoint: ``https://`` only (no private, loopback or link-local addresses)."""

    url: str = Field(max_length=2000, examples=["https://crm.example.com/hooks/switchboard"])
    event_types: list[EventType] = Field(default_factory=list, description="Empty: every event.")
    description: str = Field("", max_length=500)
    signature_scheme: Scheme = Field(
        "switchboard",
        description="`switchboard` (`X-Switchboard-Signature`) or `standard` (Standard Webhooks: "
        "`webhook-id`, `webhook-timestamp`, `webhook-signature`, verifiable with the standardwebhooks libraries).",
    )


class EndpointPublic(BaseModel):
    """An endpoint as the API shows it (never its secret, except once in :class:`EndpointCreated`)."""

    id: uuid.UUID
    url: str
    event_types: list[str]
    description: str
    is_active: bool
    consecutive_failures: int
    disabled_at: datetime | None
    disabled_reason: str | None = Field(description="Why it was disabled (a run of failures), if it was.")
    signature_scheme: str = Field(description="`switchboard` or `standard` (Standard Webhooks).")
    created_at: datetime

    @classmethod
    def of(cls, endpoint: WebhookEndpoint) -> EndpointPublic:
        return cls.model_validate(endpoint, from_attributes=True)


class EndpointCreated(EndpointPublic):
    secret: str = Field(description="The signing secret, shown only now: store it in the receiving system.")


class SecretRotation(BaseModel):
    overlap_s: int = Field(
        86_400,
        ge=0,
        le=ROTATION_OVERLAP_MAX_S,
        description="Seconds the current secret keeps signing next to the new one (0: it stops now; at most a week).",
    )


class SecretRotated(BaseModel):
    secret: str = Field(description="The new signing secret, shown only now.")
    previous_secret_until: datetime | None = Field(
        description="Until when the previous secret signs too (each delivery carries both signatures)."
    )


class EndpointUpdate(BaseModel):
    is_active: bool = Field(
        description="true re-enables a disabled endpoint (its waiting deliveries go out)."
    )


class DeliveryPublic(BaseModel):
    """One event to one endpoint, with its attempt log."""

    id: uuid.UUID
    event_id: uuid.UUID
    event_type: str
    status: str = Field(description="pending, delivered or failed")
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    log: list[dict[str, Any]] = Field(description="[{at, status_code, error, duration_ms}], newest 20.")
    created_at: datetime


async def _endpoint(session: SessionDep, tenant: TenantDep, endpoint_id: uuid.UUID) -> WebhookEndpoint:
    endpoint = await session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None or endpoint.tenant_id != tenant.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such endpoint")
    return endpoint


@webhooks_router.post(
    "",
    response_model=EndpointCreated,
    status_code=201,
    summary="Register an endpoint for signed events",
    description=(
        "Each delivery is a POST of the event envelope (JSON) with headers "
        f"`{EVENT_HEADER}`, `{DELIVERY_HEADER}` (event id), `{TIMESTAMP_HEADER}` (Unix seconds) and "
        f'`{SIGNATURE_HEADER}: v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`. Refuse old '
        "timestamps (5 minutes) and compare signatures in constant time. With `signature_scheme: standard` "
        f"the signature is Standard Webhooks' `{STANDARD_SIGNATURE_HEADER}`. Payload schemas: OpenAPI `webhooks`."
    ),
    responses={422: {"description": "The outbound-address policy refused the URL, or an unknown event type"}},
)
async def post_endpoint(
    body: EndpointCreate, tenant: TenantDep, session: SessionDep, settings: SettingsDep
) -> EndpointCreated:
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    try:
        endpoint, secret = await create_endpoint(
            session,
            tenant_id=tenant.id,
            url=body.url,
            event_types=list(body.event_types),
            description=body.description,
            cipher=cipher,
            egress=EgressPolicy.from_settings(settings),
            signature_scheme=body.signature_scheme,
        )
    except EndpointRefused as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY, str(exc)) from None
    await session.commit()
    return EndpointCreated(**EndpointPublic.of(endpoint).model_dump(), secret=secret)


@webhooks_router.get("", response_model=list[EndpointPublic], summary="List the tenant's endpoints")
async def get_endpoints(tenant: TenantDep, session: SessionDep) -> list[EndpointPublic]:
    return [EndpointPublic.of(e) for e in await list_endpoints(session, tenant_id=tenant.id)]


@webhooks_router.patch(
    "/{endpoint_id}", response_model=EndpointPublic, summary="Enable or disable an endpoint"
)
async def patch_endpoint(
    endpoint_id: uuid.UUID, body: EndpointUpdate, tenant: TenantDep, session: SessionDep
) -> EndpointPublic:
    endpoint = await _endpoint(session, tenant, endpoint_id)
    set_endpoint_active(endpoint, body.is_active, reason=None if body.is_active else "disabled by an admin")
    session.add(endpoint)
    await session.commit()
    return EndpointPublic.of(endpoint)


@webhooks_router.post(
    "/{endpoint_id}/rotate-secret",
    response_model=SecretRotated,
    summary="Give an endpoint a new signing secret",
    description="The new secret signs from now on; the current one signs too until `previous_secret_until`, "
    "so the receiving system can switch to the new secret whenever it is ready.",
)
async def post_rotate_secret(
    endpoint_id: uuid.UUID,
    body: SecretRotation,
    tenant: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
) -> SecretRotated:
    endpoint = await _endpoint(session, tenant, endpoint_id)
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    secret = rotate_secret(endpoint, cipher, overlap_s=body.overlap_s)
    session.add(endpoint)
    await session.commit()
    return SecretRotated(secret=secret, previous_secret_until=previous_secret_until(endpoint, cipher))


@webhooks_router.delete("/{endpoint_id}", status_code=204, summary="Delete an endpoint and its delivery log")
async def delete_endpoint(endpoint_id: uuid.UUID, tenant: TenantDep, session: SessionDep) -> None:
    await session.delete(await _endpoint(session, tenant, endpoint_id))
    await session.commit()


@webhooks_router.get(
    "/{endpoint_id}/deliveries", response_model=list[DeliveryPublic], summary="The endpoint's delivery log"
)
async def get_deliveries(
    endpoint_id: uuid.UUID,
    tenant: TenantDep,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[DeliveryPublic]:
    await _endpoint(session, tenant, endpoint_id)
    rows = await session.exec(
        select(WebhookDelivery)
        .where(WebhookDelivery.tenant_id == tenant.id, WebhookDelivery.endpoint_id == endpoint_id)
        .order_by(col(WebhookDelivery.created_at).desc())
        .limit(limit)
    )
    return [DeliveryPublic.model_validate(d, from_attributes=True) for d in rows.all()]


event_webhooks_router = APIRouter()
"""OpenAPI ``webhooks``: one entry per event type, its body the envelope with that event's ``data``
(mount with ``app.webhooks.include_router``)."""


def _document(event_type: str, model: type[BaseModel]) -> None:
    envelope = EventEnvelope[model]  # type: ignore[valid-type]

    async def receiver(body: Any) -> None:
        """What the endpoint receives."""

    receiver.__annotations__ = {"body": envelope, "return": None}  # a real type, not a postponed string
    receiver.__name__ = "on_" + event_type.replace(".", "_")
    event_webhooks_router.post(
        event_type,
        summary=f"{event_type}: {(model.__doc__ or '').strip().splitlines()[0]}",
        description=f"Signed with `{SIGNATURE_HEADER}`; answer 2xx within the timeout, or it is retried.",
    )(receiver)


for _type, _model in EVENT_TYPES.items():
    _document(_type, _model)
