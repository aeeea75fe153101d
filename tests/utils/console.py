"""Console users and logged-in clients for tests."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import ConsoleUser, Role
from switchboard.users import create_user

PASSWORD = "correct horse battery"
"""Password of every test user (long enough for MIN_PASSWORD_CHARS)."""
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class LoggedIn:
    """A console client with a session cookie and the session's CSRF token."""

    client: httpx.AsyncClient
    user: ConsoleUser
    csrf: str

    async def post_form(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        return await self.client.post(path, data={"csrf_token": self.csrf, **(data or {})})


async def new_user(
    sessions: async_sessionmaker[AsyncSession], *, role: Role, tenant_id: uuid.UUID | None, name: str = ""
) -> ConsoleUser:
    async with sessions() as session, session.begin():
        return await create_user(
            session,
            email=f"{role.value}-{uuid.uuid4().hex[:8]}@example.com",
            password=PASSWORD,
            role=role,
            tenant_id=None if role == Role.platform_admin else tenant_id,
            name=name,
        )


async def log_in(client: httpx.AsyncClient, user: ConsoleUser) -> LoggedIn:
    """Log ``client`` in as ``user`` through the login form; returns it with the CSRF token of its pages."""
    response = await client.post("/login", data={"email": user.email, "password": PASSWORD, "next": "/"})
    assert response.status_code == 303, response.text
    page = await client.get("/", follow_redirects=True)
    match = _CSRF.search(page.text)
    assert match, page.text[:500]
    return LoggedIn(client=client, user=user, csrf=match.group(1))


async def logged_in_page(browser: Any, console_url: str, user: ConsoleUser, *, language: str = "en") -> Any:
    """A page of a new browser context (its own cookies) logged in as ``user``, the console in
    ``language`` (``en`` / ``es``: the language cookie a user's own choice sets)."""
    context = await browser.new_context(
        viewport={"width": 1280, "height": 900}, locale="es-ES" if language == "es" else "en-US"
    )
    context.set_default_timeout(15_000)
    await context.add_cookies([{"name": "sb_lang", "value": language, "url": console_url}])
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", user.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state("networkidle")
    return page
