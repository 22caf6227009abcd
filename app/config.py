"""Settings: one object, read from the environment (and `.env`) once per process."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_JWT_SECRET = "threadline-dev-only-jwt-secret-change-me"  # refused outside dev
DEV_APP_DB_PASSWORD = "threadline-app-dev"  # refused outside dev with an external DB


def _env(name: str) -> AliasChoices:
    """Accept the unprefixed operator-facing name (SPEC §6) for a field."""
    return AliasChoices(name)


class Settings(BaseSettings):
    """Every knob of the platform. Names in SPEC §6 are kept verbatim."""

    model_config = SettingsConfigDict(
        env_prefix="THREADLINE_",
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
    )

    env: Literal["development", "test", "production"] = "development"

    # --- PostgreSQL -------------------------------------------------------------------------
    database_url: str | None = Field(default=None, validation_alias=_env("DATABASE_URL"))
    """Owner connection (runs migrations). Unset: the embedded PostgreSQL is used."""
    app_database_url: str | None = None
    """Connection of the application role; derived from DATABASE_URL when unset."""
    app_db_role: str = "threadline_app"
    app_db_password: SecretStr = SecretStr(DEV_APP_DB_PASSWORD)
    data_dir: Path = Path(".threadline")
    db_pool_size: int = Field(default=10, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)
    embedding_dim: int = Field(default=384, ge=8, le=4000)

    # --- Redis and background jobs ---------------------------------------------------------
    redis_url: str | None = Field(default=None, validation_alias=_env("REDIS_URL"))
    redis_prefix: str = "tl:"
    celery_broker_url: str | None = Field(default=None, validation_alias=_env("CELERY_BROKER_URL"))

    # --- Auth ------------------------------------------------------------------------------
    jwt_secret: SecretStr = SecretStr(DEV_JWT_SECRET)
    jwt_issuer: str = "threadline"
    access_token_ttl_seconds: int = Field(default=900, ge=30)
    refresh_token_ttl_seconds: int = Field(default=30 * 24 * 3600, ge=60)
    password_min_length: int = Field(default=8, ge=6)

    # --- HTTP ------------------------------------------------------------------------------
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest JSON request body; uploads have their own limit."""
    max_upload_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    log_level: str = "INFO"
    log_json: bool = True

    @model_validator(mode="after")
    def _refuse_development_secrets(self) -> Settings:
        if self.env == "development":
            return self
        if self.jwt_secret.get_secret_value() == DEV_JWT_SECRET:
            raise ValueError(
                "THREADLINE_JWT_SECRET must be set outside development "
                f"(THREADLINE_ENV={self.env}); generate one with `openssl rand -hex 32`"
            )
        if len(self.jwt_secret.get_secret_value()) < 32:
            raise ValueError("THREADLINE_JWT_SECRET must be at least 32 characters")
        external_db = self.database_url is not None and self.app_database_url is None
        if external_db and self.app_db_password.get_secret_value() == DEV_APP_DB_PASSWORD:
            raise ValueError(
                "THREADLINE_APP_DB_PASSWORD must be set outside development when "
                "DATABASE_URL points at an external PostgreSQL"
            )
        return self

    @property
    def embedded_database(self) -> bool:
        return self.database_url is None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
