"""Settings refuse development secrets outside development."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings


def test_development_runs_with_the_built_in_secret() -> None:
    assert Settings(env="development").jwt_secret.get_secret_value()


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
    assert settings.jwt_secret.get_secret_value() == "y" * 40
