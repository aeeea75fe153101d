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


TRANSCRIBING = ["openai", "azure", "openai_compatible", "offline"]


async def _options(page, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    return await page.eval_on_selector_all(f'select[name="{name}"] option', "os => os.map(o => o.value)")


async def test_a_voice_row_offers_only_providers_that_transcribe_and_its_test_says_what_it_heard(
    browser, console_url, screenshot, sessions, make_tenant, offline_model
):
    state, url = offline_model
    tenant = await make_tenant(name="Voice Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    await page.click("#add-transcription > summary")
    await page.click("#add-vision > summary")
    # a voice row offers the providers that transcribe, with speech-to-text model names as the hint
    assert await _options(page, "llm.transcription.0.provider") == TRANSCRIBING
    assert "anthropic" in await _options(page, "llm.vision.0.provider")  # pictures: every chat provider
    voice = await page.inner_text('[id="llm.transcription"] .deployment[data-row="0"]')
    assert "whisper-1" in voice and "gpt-4o-mini-transcribe" in voice
    assert "claude-haiku-4-5" not in voice and "llama3.1" not in voice
    picture = await page.inner_text('[id="llm.vision"] .deployment[data-row="0"]')
    assert "gemini-2.0-flash" in picture and "whisper-1" not in picture

    prefix = "llm.transcription.0"
    await page.fill(f'input[name="{prefix}.id"]', "demo-ears")
    await page.select_option(f'select[name="{prefix}.provider"]', "offline")
    assert "leave the server address empty" in await page.inner_text(
        '[id="llm.transcription"] .deployment[data-row="0"]'
    )
    await page.fill(f'input[name="{prefix}.model"]', "whisper-1")
    await page.fill(f'input[name="{prefix}.api_base"]', url + "/v1")
    test_button = '[id="llm.transcription"] .deployment[data-row="0"] .row-actions button'
    probe = "#probe-transcription-0"

    # the offline server hears no words in the test's second of silence: a pass that says so
    await page.click(test_button)
    await page.wait_for_selector(f"{probe} .probe-ok")
    passed = await page.inner_text(probe)
    assert passed.startswith("✓ demo-ears")
    assert passed.endswith("answered (no words: the test clip is silence)")
    assert "unavailable" not in passed
    await screenshot(page, "settings-voice-row-silence")

    # a model that refuses the clip is a failure, in words
    state.transcription_refuses.add("audio/wav")
    try:
        await page.click(test_button)
        await page.wait_for_selector(f"{probe} .probe-failed")
    finally:
        state.transcription_refuses.discard("audio/wav")
    failed = await page.inner_text(probe)
    assert failed.startswith("✗ demo-ears") and failed.endswith("the provider refused the request (400)")
    assert "Error" not in failed and "litellm" not in failed


async def test_a_voice_row_with_a_provider_that_cannot_transcribe_is_refused_in_words(
    browser, console_url, sessions, make_tenant
):
    tenant = await make_tenant(name="Tienda de Voz", locale={"language": "es"})
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    await page.click("#add-transcription > summary")
    prefix = "llm.transcription.0"
    assert await _options(page, f"{prefix}.provider") == TRANSCRIBING
    await page.fill(f'input[name="{prefix}.id"]', "claude-ears")
    # a form sent by other means than the page's choices: the save refuses it all the same
    await page.eval_on_selector(
        f'select[name="{prefix}.provider"]', "s => s.add(new Option('Anthropic', 'anthropic'))"
    )
    await page.select_option(f'select[name="{prefix}.provider"]', "anthropic")
    await page.fill(f'input[name="{prefix}.model"]', "claude-haiku-4-5")
    await page.click("#save-settings")
    await page.wait_for_selector("#settings-problems")
    problems = await page.inner_text("#settings-problems")
    assert (
        "claude-ears: este proveedor no puede transcribir mensajes de voz; elija OpenAI, Azure OpenAI, "
        "un servidor compatible con OpenAI o el modelo de demostración sin conexión"
    ) in problems
    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions or {}  # type: ignore[union-attr]
    assert "transcription" not in (stored.get("llm") or {})
