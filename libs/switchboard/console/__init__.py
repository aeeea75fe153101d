"""The web console (docs/console.md): users and roles, sessions, the inbox and the conversation page.

* :mod:`switchboard.users` (a package of its own): users, passwords, sessions, API tokens, login limit.
* :mod:`~switchboard.console.deps`: the current user and the role/tenant check of every page.
* :mod:`~switchboard.console.app`: templates, navigation (:func:`register_nav`), static files, errors.
* :mod:`~switchboard.console.inbox`: what the inbox and the conversation page read.
* :mod:`~switchboard.console.actions`: take over, reply, hand back, transfer, close, approve.
* :mod:`~switchboard.console.live`: Redis pub/sub → server-sent events.
* :mod:`~switchboard.console.people_pages`: the People page and the invitation link's page.
* :mod:`~switchboard.console.checklist`: the setup checklist of a tenant's home page.
* :mod:`~switchboard.console.api_keys_pages`: the API keys page and its admin API.
* :mod:`~switchboard.console.public_routes`: the public API's resources (``/api/v1``, tenant API keys).
* :mod:`~switchboard.console.canned_pages`: the tenant's canned replies.
"""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["console_routers", "install_console", "register_nav"]


def console_routers() -> list[APIRouter]:
    """The console service's routers: the pages, the admin API's routes it serves, and the public API."""
    from switchboard.analytics.routes import analytics_admin_router
    from switchboard.console.analytics_pages import analytics_pages_router
    from switchboard.console.api import conversations_admin_router
    from switchboard.console.canned_pages import canned_pages_router
    from switchboard.console.channel_pages import channel_pages_router
    from switchboard.console.conversation_pages import conversation_pages_router
    from switchboard.console.csat_pages import csat_pages_router
    from switchboard.console.customer_pages import customer_pages_router
    from switchboard.console.knowledge_pages import knowledge_pages_router
    from switchboard.console.operations_pages import operations_pages_router
    from switchboard.console.pages import pages_router
    from switchboard.console.people_pages import people_pages_router
    from switchboard.console.platform_pages import platform_pages_router
    from switchboard.console.public_routes import public_routers
    from switchboard.console.settings_pages import settings_pages_router
    from switchboard.knowledge.routes import knowledge_admin_router
    from switchboard.tenant_config.routes import settings_admin_router

    routers = [
        pages_router,
        conversation_pages_router,
        customer_pages_router,
        canned_pages_router,
        conversations_admin_router,
        settings_pages_router,
        settings_admin_router,
        knowledge_pages_router,
        knowledge_admin_router,
        analytics_pages_router,
        analytics_admin_router,
        platform_pages_router,
        operations_pages_router,
        channel_pages_router,
        people_pages_router,
        csat_pages_router,
    ]
    # imported after the People page (its import adds the menu entry): "API keys" follows "People"
    from switchboard.console.api_keys_pages import api_keys_admin_router, api_keys_pages_router

    return [*routers, api_keys_pages_router, api_keys_admin_router, *public_routers()]


def __getattr__(name: str) -> object:
    if name in ("install_console", "register_nav"):
        from switchboard.console import app

        return getattr(app, name)
    raise AttributeError(f"module 'switchboard.console' has no attribute {name!r}")
