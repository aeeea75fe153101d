"""Languages: the catalogs are complete, compile at first use, and follow the request's language."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from jinja2 import DictLoader, Environment
from switchboard.i18n import LOCALE_DIR, gettext, negotiate_language, normalize_language, translations
from switchboard.i18n.jinja import install_i18n, use_language
from switchboard.tenant_settings import localized_defaults, tenant_settings_from

ROOT = Path(__file__).resolve().parents[2]


def _catalog(lang: str):  # type: ignore[no-untyped-def]
    with (LOCALE_DIR / lang / "LC_MESSAGES" / "messages.po").open("rb") as handle:
        return read_po(handle, locale=lang)


def test_the_committed_template_holds_every_message_of_the_code_and_templates(tmp_path):
    """`make i18n` was run: extracting now finds nothing the committed messages.pot lacks."""
    out = tmp_path / "messages.pot"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "babel.messages.frontend",
            "extract",
            "-F",
            "babel.cfg",
            "-k",
            "N_",
            "--no-location",
            "--omit-header",
            "-o",
            str(out),
            "libs/switchboard",
        ],
        cwd=ROOT,
        check=True,
    )
    with out.open("rb") as handle:
        extracted = {m.id if isinstance(m.id, str) else m.id[0] for m in read_po(handle) if m.id}
    with (LOCALE_DIR / "messages.pot").open("rb") as handle:
        committed = {m.id if isinstance(m.id, str) else m.id[0] for m in read_po(handle) if m.id}
    assert extracted - committed == set(), "run `make i18n` and translate the new messages"
    assert len(extracted) > 5


def test_every_spanish_message_is_translated_and_not_fuzzy():
    catalog = _catalog("es")
    with (LOCALE_DIR / "messages.pot").open("rb") as handle:
        wanted = {m.id if isinstance(m.id, str) else m.id[0] for m in read_po(handle) if m.id}
    translated = {
        (m.id if isinstance(m.id, str) else m.id[0])
        for m in catalog
        if m.id and "fuzzy" not in m.flags and (all(m.string) if isinstance(m.string, tuple) else m.string)
    }
    assert wanted - translated == set()


def test_catalogs_compile_in_memory_without_a_build_step():
    assert not list(LOCALE_DIR.rglob("*.mo"))  # nothing to build or commit
    assert (
        gettext("es", "Thank you for contacting us. Goodbye!") == "Gracias por contactarnos. ¡Hasta pronto!"
    )
    assert gettext("en", "Thank you for contacting us. Goodbye!") == "Thank you for contacting us. Goodbye!"
    assert gettext("fr", "Thank you for contacting us. Goodbye!") == "Thank you for contacting us. Goodbye!"
    assert translations("es") is translations("es-MX")  # one compiled catalog per language


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("es-ES,es;q=0.9,en;q=0.8", "es"),
        ("en-US,en;q=0.9,es;q=0.8", "en"),
        ("fr-FR,fr;q=0.9,es;q=0.5", "es"),
        ("es;q=0, en;q=0.1", "en"),
        ("", "en"),
        (None, "en"),
        ("de", "en"),
    ],
)
def test_negotiate_language(header, expected):
    assert negotiate_language(header) == expected


def test_normalize_language():
    assert [normalize_language(v) for v in ("ES", "es_AR", "en-GB", "pt", None, "")] == [
        "es",
        "es",
        "en",
        None,
        None,
        None,
    ]


def test_jinja_templates_render_in_the_language_of_the_block():
    env = install_i18n(
        Environment(
            loader=DictLoader({"t.html": "{{ _('Thank you for contacting us. Goodbye!') }}"}), autoescape=True
        )
    )
    template = env.get_template("t.html")
    with use_language("es"):
        assert template.render() == "Gracias por contactarnos. ¡Hasta pronto!"
    with use_language("en"):
        assert template.render() == "Thank you for contacting us. Goodbye!"
    assert template.render() == "Thank you for contacting us. Goodbye!"  # default outside a block


def test_fixed_customer_texts_follow_the_tenants_language():
    spanish = tenant_settings_from({"locale": {"language": "es"}})
    assert spanish.agent.farewell_reply == "Gracias por contactarnos. ¡Hasta pronto!"
    assert spanish.handoff.queue_reply.startswith("Todo nuestro equipo está ocupado")
    assert spanish.handoff.approval_expired_reply.startswith("No pudimos confirmar su solicitud")
    assert spanish.rate_limits.slowdown_reply.startswith("Está enviando mensajes")
    assert spanish.whatsapp.opt_out_reply.startswith("Se ha dado de baja")
    english = tenant_settings_from({})
    assert english.agent.farewell_reply == "Thank you for contacting us. Goodbye!"
    # a bad locale section falls back to English, the other sections still load
    broken = tenant_settings_from({"locale": {"language": "xx"}, "agent": {"name": "Sam"}})
    assert (broken.locale.language, broken.agent.name) == ("en", "Sam")
    assert broken.agent.farewell_reply == english.agent.farewell_reply


def test_every_translatable_default_has_a_spanish_text():
    from switchboard.tenant_config import all_sections

    for model in all_sections().values():
        for name, english in localized_defaults(model, "en").items():
            assert localized_defaults(model, "es")[name] != english, f"{model.__name__}.{name}"
