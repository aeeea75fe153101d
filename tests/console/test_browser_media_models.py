"""Agent settings, in a real headless Chromium: a tenant admin adds a voice message model and a picture
model under the chat models, tests each as typed, saves, and sees them (keys write-only) after a reload."""

from __future__ import annotations

from switchboard.db.models import Role, Tenant
from switchboard.standins.offline_server import ScriptedResponse

from tests.console.test_browser_pages import _logged_in_page
from tests.utils.agent import answer_with_script, unique_model
from tests.utils.console import new_user

TENANT_KEY = "sk-tenant-whisper-browser-k3y"


async def _fill_row(
    page, kind: str, *, deployment_id: str, model: str, api_base: str, key: str | None
) -> None:  # type: ignore[no-untyped-def]
    await page.click(f"#add-{kind} > summary")
    prefix = f"llm.{kind}.0"
    await page.fill(f'input[name="{prefix}.id"]', deployment_id)
    await page.select_option(f'select[name="{prefix}.provider"]', "openai_compatible")
    await page.fill(f'input[name="{prefix}.model"]', model)
    await page.fill(f'input[name="{prefix}.api_base"]', api_base)
    if key is not None:
        await page.fill(f'input[name="{prefix}.api_key"]', key)


async def test_an_admin_adds_tests_and_saves_a_voice_and_a_picture_model(
    browser, console_url, screenshot, sessions, make_tenant, offline_model
):
    state, url = offline_model
    tenant = await make_tenant(name="Media Shop")
    await answer_with_script(sessions, tenant.id, offline_model)
    eyes = unique_model("eyes")
    state.script(eyes).default = ScriptedResponse(content="Red.")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    # the two lists sit in the model section, under the chat models, with their words
    section = await page.inner_text("#section-model")
    assert "Voice message models" in section and "Picture models" in section

    await _fill_row(
        page,
        "transcription",
        deployment_id="own-whisper",
        model="whisper-1",
        api_base=url + "/v1",
        key=TENANT_KEY,
    )
    state.transcriptions.clear()
    await page.click('[id="llm.transcription"] .deployment[data-row="0"] .row-actions button')
    await page.wait_for_selector("#probe-transcription-0 .probe-ok")
    assert "own-whisper" in await page.inner_text("#probe-transcription-0")
    assert [t["sniffed"] for t in state.transcriptions] == ["audio/wav"]  # the test's second of silence

    await _fill_row(page, "vision", deployment_id="own-eyes", model=eyes, api_base=url + "/v1", key=None)
    await page.click('[id="llm.vision"] .deployment[data-row="0"] .row-actions button')
    await page.wait_for_selector("#probe-vision-0 .probe-ok")
    assert "Red." in await page.inner_text("#probe-vision-0")
    (asked,) = state.script(eyes).requests
    assert asked["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")

    await page.click("#save-settings")
    await page.wait_for_selector("#settings-saved")
    saved = await page.inner_text("#settings-saved")
    assert "Voice message models" in saved and "Picture models" in saved
    await screenshot(page, "settings-media-models")

    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions["llm"]  # type: ignore[union-attr]
    (whisper,) = stored["transcription"]
    assert whisper["id"] == "own-whisper" and whisper["model"] == "whisper-1"
    assert whisper["api_key_encrypted"] and TENANT_KEY not in str(stored)  # stored encrypted only
    assert [v["id"] for v in stored["vision"]] == ["own-eyes"]

    await page.reload()
    assert await page.input_value('input[name="llm.transcription.0.id"]') == "own-whisper"
    assert await page.input_value('input[name="llm.vision.0.model"]') == eyes
    assert await page.input_value('input[name="llm.transcription.0.api_key"]') == ""  # write-only
    assert TENANT_KEY not in await page.content()
