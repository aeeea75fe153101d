"""A stored key belongs to the address it was given for: "keep the stored key" never carries it to
another host, port, scheme or provider, whatever the spelling (hypothesis over the settings document)."""

from __future__ import annotations

from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st
from switchboard.crypto import CredentialCipher
from switchboard.tenant_config import prepare_settings


def _cipher() -> CredentialCipher:
    from cryptography.fernet import Fernet

    return CredentialCipher(Fernet.generate_key())


_KEY_CIPHER = _cipher()
TOKEN = _KEY_CIPHER.encrypt({"api_key": "sk-stored"})

_hosts = st.sampled_from(
    [
        "api.openai.com",
        "api.anthropic.com",
        "127.0.0.1",
        "gpu-box",
        "evil.example",
        "api.openai.com.evil.example",
    ]
)
_bases = st.one_of(
    st.none(),
    st.builds(
        lambda scheme, user, host, port, path: f"{scheme}://{user}{host}{port}{path}",
        st.sampled_from(["http", "https", "HTTPS"]),
        st.sampled_from(["", "api.openai.com@", "u:p@"]),
        _hosts,
        st.sampled_from(["", ":443", ":80", ":8443"]),
        st.sampled_from(["", "/", "/v1", "/v1/", "/other"]),
    ),
)
_providers = st.sampled_from(["openai", "anthropic", "openai_compatible", "ollama"])


def _where(base: str | None, provider: str) -> tuple:
    """An oracle independent of the code: what a connection would see (scheme, user info, host, port)."""
    if base is None:
        return (provider, None)
    parts = urlsplit(base)
    scheme = parts.scheme.lower()
    port = parts.port or {"https": 443, "http": 80}[scheme]
    return (provider, scheme, parts.username, parts.password, (parts.hostname or "").rstrip("."), port)


@settings(max_examples=150, deadline=None)
@given(old=_bases, new=_bases, old_provider=_providers, new_provider=_providers)
def test_keep_keeps_a_deployment_key_only_at_the_same_address(old, new, old_provider, new_provider):
    stored_item = {"id": "main", "provider": old_provider, "model": "m", "api_key_encrypted": TOKEN}
    if old is not None:
        stored_item["api_base"] = old
    public_item = {"id": "main", "provider": new_provider, "model": "m", "api_key": "set"}
    if new is not None:
        public_item["api_base"] = new
    result = prepare_settings(
        {"llm": {"deployments": [stored_item]}},
        {"llm": {"deployments": [public_item]}},
        cipher=lambda: _KEY_CIPHER,
    )
    kept = "api_key_encrypted" in result["llm"]["deployments"][0]
    if _where(old, old_provider) != _where(new, new_provider):
        assert not kept, (old, old_provider, new, new_provider)
    if kept:
        assert result["llm"]["deployments"][0]["api_key_encrypted"] == TOKEN


@settings(max_examples=100, deadline=None)
@given(
    old=_bases,
    new=_bases,
    model=st.sampled_from([None, "text-embedding-3-large", "cohere/embed-english-v3.0"]),
)
def test_keep_keeps_the_embedding_key_only_at_the_same_address(old, new, model):
    stored = {"embedding_api_key_encrypted": TOKEN}
    if old is not None:
        stored["embedding_api_base"] = old
    public: dict = {"embedding_api_key": "set"}
    if new is not None:
        public["embedding_api_base"] = new
    if model is not None:
        public["embedding_model"] = model
    result = prepare_settings({"knowledge": stored}, {"knowledge": public}, cipher=lambda: _KEY_CIPHER)
    kept = "embedding_api_key_encrypted" in result.get("knowledge", {})
    provider = "cohere" if model and model.startswith("cohere/") else "openai"
    if _where(old, "openai") != _where(new, provider):
        assert not kept, (old, new, model)


def test_a_new_key_with_a_new_address_is_stored():
    result = prepare_settings(
        {"llm": {"deployments": [{"id": "main", "model": "m", "api_key_encrypted": TOKEN}]}},
        {
            "llm": {
                "deployments": [
                    {"id": "main", "model": "m", "api_base": "http://gpu-box/v1", "api_key": "sk-new"}
                ]
            }
        },
        cipher=lambda: _KEY_CIPHER,
    )
    token = result["llm"]["deployments"][0]["api_key_encrypted"]
    assert _KEY_CIPHER.decrypt(token) == {"api_key": "sk-new"}
