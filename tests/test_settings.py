"""Settings: malformed values fail at start-up naming the setting; secrets are generated once."""

import pytest
from cryptography.fernet import Fernet
from switchboard.errors import SettingsError
from switchboard.settings import load_settings


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
    key = settings.resolved_encryption_key()
    Fernet(key)  # a valid key
    token = settings.resolved_service_token()
    again = load_settings(data_dir=tmp_path, _env_file=None)
    assert again.resolved_encryption_key() == key
    assert again.resolved_service_token() == token
    assert len(token) >= 40
    assert (tmp_path / "secrets" / "service.token").stat().st_mode & 0o777 == 0o600


def test_explicit_secret_wins(tmp_path):
    key = Fernet.generate_key().decode()
    settings = load_settings(data_dir=tmp_path, encryption_key=key, service_token="tok", _env_file=None)
    assert settings.resolved_encryption_key() == key.encode()
    assert settings.resolved_service_token() == "tok"
    assert not (tmp_path / "secrets").exists()
