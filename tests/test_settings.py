"""Settings: malformed values fail at start-up naming the setting; secrets are generated once."""

import pytest
from cryptography.fernet import Fernet
from switchboard.errors import SettingsError
from switchboard.settings import GENERATED_SECRETS, KnowledgeBaseSettings, NetworkSettings, load_settings


def test_defaults_leave_urls_unset_for_embedded_servers(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    settings = load_settings(data_dir=tmp_path, _env_file=None)
    assert settings.database_url is None
    assert settings.redis_url is None
    assert settings.orchestrator_port == 8100


@pytest.mark.parametrize(
    ("env", "value", "fragment"),
    [
        ("DATABASE_URL", "mysql://u@h/db", "postgresql://"),
        ("REDIS_URL", "http://localhost:6379", "redis://"),
        ("WHATSAPP_PORT", "not-a-port", "integer"),
        ("WHATSAPP_PORT", "70000", "less than or equal to 65535"),
        ("LOG_FORMAT", "xml", "'auto', 'json' or 'console'"),
        ("ENCRYPTION_KEY", "short", "Fernet key"),
    ],
)
def test_malformed_setting_names_the_variable(monkeypatch, env, value, fragment):
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError) as excinfo:
        load_settings(_env_file=None)
    assert excinfo.value.setting == env
    assert env in str(excinfo.value)
    assert fragment in str(excinfo.value)


def test_secret_values_are_not_echoed_in_errors(monkeypatch):
    monkeypatch.setenv("ENCRYPTION_KEY", "super-secret-but-wrong")
    with pytest.raises(SettingsError) as excinfo:
        load_settings(_env_file=None)
    assert "super-secret-but-wrong" not in str(excinfo.value)


def test_env_file_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv("GMAIL_PORT", raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("GMAIL_PORT=9123\n")
    assert load_settings(_env_file=str(env_file)).gmail_port == 9123


def test_generated_secrets_are_created_once_and_reused(tmp_path):
    settings = load_settings(data_dir=tmp_path, _env_file=None)
    key = settings.secret("encryption_key").encode()
    Fernet(key)  # a valid key
    token = settings.secret("service_token")
    again = load_settings(data_dir=tmp_path, _env_file=None)
    assert again.secret("encryption_key").encode() == key
    assert again.secret("service_token") == token
    assert len(token) >= 40
    assert (tmp_path / "secrets" / "service.token").stat().st_mode & 0o777 == 0o600


def test_explicit_secret_wins(tmp_path):
    key = Fernet.generate_key().decode()
    settings = load_settings(data_dir=tmp_path, encryption_key=key, service_token="tok", _env_file=None)
    assert settings.secret("encryption_key").encode() == key.encode()
    assert settings.secret("service_token") == "tok"
    assert not (tmp_path / "secrets").exists()


def test_every_secret_has_one_resolver_an_empty_value_counts_as_unset(tmp_path):
    settings = load_settings(data_dir=tmp_path, admin_token="", meta_app_secret="from-env", _env_file=None)
    values = {name: settings.secret(name) for name in GENERATED_SECRETS}
    assert values["meta_app_secret"] == "from-env"
    assert values["admin_token"]  # empty ADMIN_TOKEN: generated
    files = {p.name: p for p in (tmp_path / "secrets").iterdir()}
    assert set(files) == {s.filename for n, s in GENERATED_SECRETS.items() if n != "meta_app_secret"}
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in files.values())
    Fernet(values["encryption_key"].encode())
    again = load_settings(data_dir=tmp_path, _env_file=None)
    assert {name: again.secret(name) for name in GENERATED_SECRETS if name != "meta_app_secret"} == {
        name: value for name, value in values.items() if name != "meta_app_secret"
    }


def test_groups_keep_the_flat_environment_names(monkeypatch):
    monkeypatch.setenv("KB_CHUNK_SIZE_CHARS", "500")
    monkeypatch.setenv("ORCHESTRATOR_URL", "http://orchestrator:8100")
    monkeypatch.setenv("INBOUND_MAX_TRIES", "4")
    settings = load_settings(_env_file=None, whatsapp_port=9101)
    assert isinstance(settings, KnowledgeBaseSettings) and isinstance(settings, NetworkSettings)
    assert (settings.kb_chunk_size_chars, settings.inbound_max_tries, settings.whatsapp_port) == (
        500,
        4,
        9101,
    )
    assert settings.orchestrator_url == "http://orchestrator:8100"
    assert KnowledgeBaseSettings(_env_file=None).kb_chunk_size_chars == 500  # one concern on its own


def test_encryption_key_may_list_several_keys_newest_first(tmp_path, monkeypatch):
    new, old = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    monkeypatch.setenv("ENCRYPTION_KEY", f"{new},{old}")
    settings = load_settings(data_dir=tmp_path, _env_file=None)
    assert settings.secret("encryption_key") == f"{new},{old}"
    monkeypatch.setenv("ENCRYPTION_KEY", f"{new},not-a-key")
    with pytest.raises(SettingsError) as excinfo:
        load_settings(_env_file=None)
    assert excinfo.value.setting == "ENCRYPTION_KEY"
    assert "key 2 is not a Fernet key" in str(excinfo.value)
    assert "not-a-key" not in str(excinfo.value)
