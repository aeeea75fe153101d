"""The top bar in Spanish, in a real headless Chromium, at 1366 and 1024 px: the menu is one row of
whole links; a long business name and e-mail move the account part to a second row, whole, never
wider than the window (a cut name ends in an ellipsis, its full text in the title). Screenshots."""

from __future__ import annotations

from typing import Any

import pytest
from switchboard.db.models import Role

from tests.utils.console import PASSWORD, new_user

MEASURE = """() => {
  const bar = document.querySelector('header.topbar');
  const parts = [...bar.querySelectorAll('nav a, .who > *, .brand, .lang-switch select')];
  return {
    height: bar.getBoundingClientRect().height,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    broken: parts.filter(p => p.getClientRects().length > 1).map(p => p.textContent.trim()),
    cut: [...bar.querySelectorAll('.who .tenant, .who .user')]
           .filter(p => p.scrollWidth > p.clientWidth + 1 && !p.title.includes(p.textContent.trim().split(' (')[0]))
           .map(p => p.textContent.trim()),
    tops: [...bar.querySelectorAll('.who > *')].map(p => Math.round(p.getBoundingClientRect().top)),
    rows: new Set([...bar.querySelectorAll('nav a')].map(a => Math.round(a.getBoundingClientRect().top))).size,
    links: [...bar.querySelectorAll('nav a')].map(a => a.textContent.trim()),
  };
}"""


@pytest.mark.parametrize("width", [1366, 1024])
async def test_the_spanish_top_bar_fits(
    browser: Any, console_url: str, screenshot: Any, sessions: Any, make_tenant: Any, width: int
) -> None:
    tenant = await make_tenant("Ferretería y Suministros del Norte")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    context = await browser.new_context(viewport={"width": width, "height": 800}, locale="es-ES")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", admin.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    bar = await page.evaluate(MEASURE)
    await screenshot(page, f"topbar-es-{width}")
    assert "Ajustes del agente" in bar["links"] and len(bar["links"]) >= 7
    assert bar["overflow"] <= 0 and bar["broken"] == [] and bar["cut"] == [], bar
    assert bar["rows"] == 1 and max(bar["tops"]) - min(bar["tops"]) < 8 and bar["height"] < 100, bar
    await context.close()
