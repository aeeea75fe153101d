"""Which key goes with a model call (switchboard.llm.keys): a platform key only to its provider's
official endpoint, for the platform's default models or where the operator allows tenants to use it."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import SecretStr
from switchboard.crypto import CredentialCipher
from switchboard.llm.config import DeploymentSettings, LLMSettings, encrypt_api_key
from switchboard.llm.keys import (
    UNKNOWN_PROVIDER,
    choose_key,
    deployment_key_provider,
    embedding_provider,
    is_official_endpoint,
    normalize_base,
    routed_provider,
)
from switchboard.llm.router import NO_KEY, ModelGateway

OPENAI_CANARY = "sk-platform-openai-canary"
ANTHROPIC_CANARY = "sk-ant-platform-canary"


def _settings(settings, **update):  # type: ignore[no-untyped-def]
    return settings.model_copy(
        update={
            "openai_api_key": SecretStr(OPENAI_CANARY),
            "anthropic_api_key": SecretStr(ANTHROPIC_CANARY),
            **update,
        }
    )


@pytest.mark.parametrize(
    ("provider", "base"),
    [
        ("openai", None),
        ("openai", ""),
        ("openai", "https://api.openai.com/v1"),
        ("openai", "https://api.openai.com"),
        ("openai", "HTTPS://API.OpenAI.com.:443/v1/"),
        ("anthropic", None),
        ("anthropic", "https://api.anthropic.com"),
        ("anthropic", "https://api.anthropic.com/v1/"),
    ],
)
def test_the_official_endpoints_in_any_spelling_are_official(provider, base):
    assert is_official_endpoint(provider, base)


@pytest.mark.parametrize(
    ("provider", "base"),
    [
        ("openai", "http://api.openai.com/v1"),  # not https
        ("openai", "https://api.openai.com:8443/v1"),
        ("openai", "https://api.openai.com.evil.example/v1"),
        ("openai", "https://evil.example/api.openai.com/v1"),
        ("openai", "https://api.openai.com@127.0.0.1/v1"),
        ("openai", "https://user:pw@api.openai.com/v1"),
        ("openai", "https://evil.example\\@api.openai.com/v1"),
        ("openai", "https://api.openai.com/v1?x=1"),
        ("openai", "https://api.openai.com/v1#frag"),
        ("openai", "https://api.openai.com/v2"),
        ("openai", "https://api%2eopenai.com/v1"),
        ("openai", " https://api.openai.com/v1"),
        ("openai", "https://api.openai.com/v1\n"),
        ("openai", "https://аpi.openai.com/v1"),  # Cyrillic a
        ("openai", "https://api.anthropic.com/v1"),  # another provider's endpoint
        ("anthropic", "https://api.openai.com/v1"),
        ("openai", "http://127.0.0.1:9/v1"),
        ("openai_compatible", None),
        ("openai_compatible", "https://api.openai.com/v1"),
        ("ollama", None),
        ("offline", None),
    ],
)
def test_anything_else_is_not_official(provider, base):
    assert not is_official_endpoint(provider, base)


_HOST_PARTS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.@:%[]\\/", min_size=1, max_size=20)


@given(prefix=_HOST_PARTS, suffix=_HOST_PARTS)
def test_a_host_around_the_official_one_is_never_official(prefix, suffix):
    """Text before or after the official host (subdomain, suffix, user info, port, path tricks) makes
    another address; none of them counts as OpenAI's endpoint."""
    for base in (
        f"https://{prefix}api.openai.com/v1",
        f"https://api.openai.com{suffix}",
        f"https://{prefix}@api.openai.com/v1",
    ):
        normalized = normalize_base(base)
        if normalized in ("https://api.openai.com", "https://api.openai.com/v1"):
            # only spellings that are the official endpoint itself normalize to it (a trailing slash,
            # a trailing dot on the host, the default port)
            assert "@" not in base.split("//", 1)[1].split("/", 1)[0]
        else:
            assert not is_official_endpoint("openai", base)


@given(base=st.text(max_size=60))
def test_is_official_never_raises_and_agrees_with_the_normal_form(base):
    official = is_official_endpoint("openai", base)
    if official and base:
        assert normalize_base(base) in ("https://api.openai.com", "https://api.openai.com/v1")


@given(
    upper=st.booleans(),
    dot=st.booleans(),
    port=st.booleans(),
    v1=st.booleans(),
    slashes=st.integers(0, 3),
)
def test_harmless_spellings_of_the_official_endpoint_stay_official(upper, dot, port, v1, slashes):
    host = "API.OPENAI.COM" if upper else "api.openai.com"
    base = f"https://{host}{'.' if dot else ''}{':443' if port else ''}{'/v1' if v1 else ''}{'/' * slashes}"
    assert is_official_endpoint("openai", base)


def test_choose_key_sends_the_platform_key_only_to_the_official_endpoint_and_where_allowed(settings):
    allowed = _settings(settings, tenants_may_use_platform_keys=True)
    closed = _settings(settings)

    def pick(s, **kw):  # type: ignore[no-untyped-def]
        base = {"provider": "openai", "api_base": None, "stored_key": None, "platform_default": False}
        return choose_key(s, **{**base, **kw}, what="test")

    assert pick(allowed) == OPENAI_CANARY
    assert pick(allowed, provider="anthropic") == ANTHROPIC_CANARY
    assert pick(allowed, api_base="http://127.0.0.1:9/v1") is None
    assert pick(allowed, provider="openai_compatible", api_base="http://127.0.0.1:9/v1") is None
    assert pick(closed) is None  # a tenant's own model: not without the operator's consent
    assert pick(closed, platform_default=True) == OPENAI_CANARY  # the platform's default model
    assert pick(closed, platform_default=True, api_base="http://127.0.0.1:9/v1") is None
    assert pick(closed, stored_key="sk-tenant", api_base="http://127.0.0.1:9/v1") == "sk-tenant"
    assert pick(settings.model_copy(update={"openai_api_key": None}), platform_default=True) is None


def test_the_router_sends_the_platform_key_only_where_the_rule_allows(settings):
    """The keys LiteLLM is configured with, per deployment (no call leaves the machine)."""

    def key_of(s, deployment: DeploymentSettings) -> str:  # type: ignore[no-untyped-def]
        gateway = ModelGateway(settings=s, cipher=CredentialCipher(s.secret("encryption_key").encode()))
        router = gateway.router_for(uuid.uuid4(), LLMSettings(deployments=[deployment]))
        (entry,) = router.router.get_model_list()
        return entry["litellm_params"]["api_key"]

    closed, allowed = _settings(settings), _settings(settings, tenants_may_use_platform_keys=True)
    default = DeploymentSettings(id="d", provider="openai", model="gpt-4o-mini")  # the platform's default
    own = DeploymentSettings(id="o", provider="openai", model="gpt-4.1")
    elsewhere = DeploymentSettings(
        id="e", provider="openai", model="gpt-4o-mini", api_base="http://127.0.0.1:9/v1"
    )
    claude_elsewhere = DeploymentSettings(
        id="c", provider="anthropic", model="claude-haiku-4-5", api_base="http://127.0.0.1:9"
    )
    assert key_of(closed, default) == OPENAI_CANARY
    assert key_of(closed, own) == NO_KEY
    assert key_of(allowed, own) == OPENAI_CANARY
    assert key_of(allowed, elsewhere) == NO_KEY
    assert key_of(allowed, claude_elsewhere) == NO_KEY
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    with_key = elsewhere.model_copy(update={"api_key_encrypted": encrypt_api_key(cipher, "sk-tenant-own")})
    assert key_of(closed, with_key) == "sk-tenant-own"


def test_embedding_provider_is_where_litellm_routes_the_model():
    assert embedding_provider(None) == "openai"
    assert embedding_provider("text-embedding-3-small") == "openai"
    assert embedding_provider("openai/text-embedding-3-large") == "openai"
    assert embedding_provider("cohere/embed-english-v3.0") == "cohere"
    assert embedding_provider("embed-english-v3.0") == "cohere"
    assert embedding_provider("text-embedding-004") == "vertex_ai"
    assert embedding_provider("amazon.titan-embed-text-v1") == "bedrock"
    assert embedding_provider("no-such-model-anywhere") == UNKNOWN_PROVIDER
    # a bare name with a base URL goes to that OpenAI-compatible server as openai/<model>
    assert embedding_provider("embed-english-v3.0", "https://embed.example.com/v1") == "openai"


@pytest.mark.parametrize("model", ["embed-english-v3.0", "text-embedding-004", "amazon.titan-embed-text-v1"])
def test_the_openai_platform_key_never_goes_with_a_bare_model_of_another_provider(settings, model):
    allowed = _settings(settings, tenants_may_use_platform_keys=True)
    key = choose_key(
        allowed,
        provider=embedding_provider(model),
        api_base=None,
        stored_key=None,
        platform_default=False,
        what="embedding",
    )
    assert key is None


@given(
    provider=st.sampled_from(
        ["openai", "anthropic", "azure", "gemini", "openai_compatible", "ollama", "offline"]
    ),
    model=st.from_regex(r"[A-Za-z0-9._:@+-]{1,30}(/[A-Za-z0-9._:@+-]{1,20})?", fullmatch=True),
)
def test_a_deployment_gets_a_platform_key_only_for_the_provider_litellm_routes_it_to(provider, model):
    """Whatever model name a tenant types, the provider whose key may go with it is the one LiteLLM
    sends the deployment's model string to."""
    try:
        deployment = DeploymentSettings(id="d", provider=provider, model=model)
    except ValueError:  # a name refused at save never reaches a call
        assume(False)
    keyed = deployment_key_provider(provider, deployment.litellm_model())
    if keyed in ("openai", "anthropic"):
        assert routed_provider(deployment.litellm_model()) == keyed == provider


@given(
    base=st.one_of(
        st.text(max_size=80), st.from_regex(r"[a-zA-Z]{2,5}://[^/]{0,30}(/.{0,20})?", fullmatch=True)
    )
)
def test_normalize_base_never_raises_and_is_stable(base):
    """Any text a tenant may type: a normal form or the text itself, and normalizing twice changes nothing."""
    once = normalize_base(base)
    assert once is None or normalize_base(once) == once


@pytest.mark.parametrize(("provider", "routed"), [("azure", "azure"), ("gemini", "gemini")])
def test_azure_and_gemini_deployments_reach_their_provider_with_their_own_key_only(
    make_settings, provider, routed
):
    """Azure OpenAI and Gemini rows go to LiteLLM's azure / gemini routes, and never carry the platform's
    OpenAI or Anthropic key: they answer with the key the tenant stored."""
    deployment = DeploymentSettings(
        id="d", provider=provider, model="my-deployment", api_base="https://x.openai.azure.com"
    )
    assert deployment.litellm_model() == f"{provider}/my-deployment"
    assert routed_provider(deployment.litellm_model()) == routed
    settings = make_settings(openai_api_key="sk-platform", tenants_may_use_platform_keys=True)
    base = {"provider": provider, "api_base": deployment.api_base, "platform_default": False, "what": "test"}
    assert choose_key(settings, stored_key=None, **base) is None
    assert choose_key(settings, stored_key="tenant-key", **base) == "tenant-key"
