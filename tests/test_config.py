"""Settings refuse development secrets outside development."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings


def test_development_without_a_secret_generates_a_private_random_one(tmp_path: Path) -> None:
    first = Settings(env="development", data_dir=tmp_path).jwt_signing_key()
    again = Settings(env="development", data_dir=tmp_path).jwt_signing_key()
    elsewhere = Settings(env="development", data_dir=tmp_path / "other").jwt_signing_key()
    assert first == again
    assert len(first) == 64
    assert elsewhere != first
    assert (tmp_path / "jwt-secret").stat().st_mode & 0o777 == 0o600


def test_placeholders_from_the_example_file_are_refused() -> None:
    with pytest.raises(ValidationError, match="placeholder"):
        Settings(env="production", jwt_secret="change-me-to-64-hex-characters-from-openssl-rand")


@pytest.mark.parametrize("env", ["production", "test"])
def test_the_default_jwt_secret_is_refused_outside_development(env: str) -> None:
    with pytest.raises(ValidationError, match="THREADLINE_JWT_SECRET must be set"):
        Settings(env=env)


def test_a_short_jwt_secret_is_refused_in_production() -> None:
    with pytest.raises(ValidationError, match="at least 32"):
        Settings(env="production", jwt_secret="short")


def test_an_external_database_needs_a_real_application_password() -> None:
    with pytest.raises(ValidationError, match="THREADLINE_APP_DB_PASSWORD"):
        Settings(
            env="production",
            jwt_secret="x" * 40,
            database_url="postgresql://owner:pw@db/threadline",
        )
    ok = Settings(
        env="production",
        jwt_secret="x" * 40,
        database_url="postgresql://owner:pw@db/threadline",
        app_db_password="a-real-password",
    )
    assert ok.database_url is not None


def test_spec_names_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/d")
    monkeypatch.setenv("REDIS_URL", "redis://h:6379/0")
    monkeypatch.setenv("THREADLINE_DATA_DIR", "/tmp/somewhere")
    monkeypatch.setenv("THREADLINE_JWT_SECRET", "y" * 40)
    settings = Settings()
    assert settings.database_url == "postgresql://u@h/d"
    assert settings.redis_url == "redis://h:6379/0"
    assert str(settings.data_dir) == "/tmp/somewhere"
    assert settings.jwt_signing_key() == "y" * 40
