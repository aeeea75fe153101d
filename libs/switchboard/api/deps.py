"""FastAPI dependencies shared by every route module, as stackable ``Annotated`` aliases.

A route states what it needs in its signature; how it is obtained lives here. The service shell
(:func:`switchboard.service_app.create_service_app`, and the tool server's app) puts the process
settings in ``app.state.settings`` and the resources it opened in ``app.state.resources``.

* ``SettingsDep``: the process :class:`~switchboard.settings.Settings`.
* ``ResourcesDep``: the :class:`~switchboard.runtime.resources.Resources` of the lifespan.
* ``SessionsDep``: the session factory, for routes that run several short transactions.
* ``SessionDep``: one session for the request (closed after it; the route commits what it changes).
* ``GatewayDep``: the process's :class:`~switchboard.llm.router.ModelGateway` (the orchestrator's, when
  the app has one), built on first use.
* ``TenantDep``: the tenant named by the path's ``{slug}`` (slug or id), loaded in ``SessionDep``'s
  session; unknown: 404 ``{"detail": "tenant 'x' not found"}``.
* ``ServiceAuth`` / ``AdminAuth`` (:mod:`switchboard.api.auth`) check bearer tokens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.crypto import CredentialCipher
from switchboard.db.models import Tenant
from switchboard.errors import TenantNotFound
from switchboard.llm.router import ModelGateway
from switchboard.runtime.resources import Resources
from switchboard.settings import Settings
from switchboard.tenants import get_tenant

__all__ = [
    "SettingsDep",
    "ResourcesDep",
    "SessionsDep",
    "SessionDep",
    "GatewayDep",
    "gateway_from_app",
    "TenantDep",
    "TENANT_NOT_FOUND_RESPONSE",
    "tenant_not_found",
]


async def get_settings(request: Request) -> Settings:
    """``app.state.settings``. (``async`` so FastAPI calls it on the event loop: a plain ``def``
    dependency is run in the thread pool, a thread hop per request.)"""
    return request.app.state.settings


async def get_resources(request: Request) -> Resources:
    """``app.state.resources`` (set once the lifespan opened them; ``async``: no thread hop)."""
    return request.app.state.resources


SettingsDep = Annotated[Settings, Depends(get_settings)]
ResourcesDep = Annotated[Resources, Depends(get_resources)]


async def get_sessions(resources: ResourcesDep) -> async_sessionmaker[AsyncSession]:
    return resources.sessions


SessionsDep = Annotated[async_sessionmaker[AsyncSession], Depends(get_sessions)]


async def get_session(sessions: SessionsDep) -> AsyncIterator[AsyncSession]:
    """One session per request; what the route did not commit is rolled back when it closes."""
    async with sessions() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]


def gateway_from_app(request: Request, settings: SettingsDep) -> ModelGateway:
    """The process's model gateway: the orchestrator's when the app has one (``app.state.orchestrator``,
    so one process keeps one set of deployment cooldowns), else ``app.state.model_gateway``, built on
    first use from the settings."""
    state = request.app.state
    orchestrator = getattr(state, "orchestrator", None)
    if orchestrator is not None:
        gateway: ModelGateway = orchestrator.gateway
        return gateway
    gateway = getattr(state, "model_gateway", None)
    if gateway is None:
        gateway = ModelGateway(
            settings=settings,
            cipher=CredentialCipher(settings.secret("encryption_key").encode()),
            max_concurrent_calls=settings.model_call_concurrency,
        )
        state.model_gateway = gateway
    return gateway


GatewayDep = Annotated[ModelGateway, Depends(gateway_from_app)]


def tenant_not_found(slug: str) -> HTTPException:
    """The one 404 of an unknown tenant: ``{"detail": "tenant 'x' not found"}``."""
    return HTTPException(status.HTTP_404_NOT_FOUND, f"tenant {slug!r} not found")


TENANT_NOT_FOUND_RESPONSE = {404: {"description": "No tenant with that slug or id"}}
"""``responses=`` entry for routers under ``/v1/admin/tenants/{slug}`` (the OpenAPI documents the 404)."""


async def get_tenant_from_path(
    slug: Annotated[str, Path(description="Tenant slug (or id).")], session: SessionDep
) -> Tenant:
    try:
        return await get_tenant(session, slug)
    except TenantNotFound:
        raise tenant_not_found(slug) from None


TenantDep = Annotated[Tenant, Depends(get_tenant_from_path)]
