"""Where the two database roles connect: the owner (migrations) and the application role."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import URL, make_url

from app.config import Settings


@dataclass(frozen=True)
class DatabaseUrls:
    """SQLAlchemy URLs (asyncpg driver) for the owner and the application role."""

    owner: URL
    app: URL

    def app_libpq(self) -> str:
        """The application role's URL in libpq form, for psycopg (the checkpointer's pool)."""
        return libpq_url(self.app)

    def owner_libpq(self) -> str:
        """The owner role's URL in libpq form (psycopg and other libpq clients)."""
        return libpq_url(self.owner)


def asyncpg_url(raw: str | URL) -> URL:
    """Accept postgres://, postgresql://, postgresql+psycopg:// ... and use asyncpg."""
    url = make_url(raw) if isinstance(raw, str) else raw
    if url.get_backend_name() not in {"postgres", "postgresql"}:
        raise ValueError(f"not a PostgreSQL URL: {url.render_as_string(hide_password=True)}")
    return url.set(drivername="postgresql+asyncpg")


def libpq_url(url: URL) -> str:
    """A SQLAlchemy URL as a plain libpq connection string, password included."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def resolve_database_urls(settings: Settings) -> DatabaseUrls:
    """Resolve both URLs, starting the embedded PostgreSQL when `DATABASE_URL` is unset."""
    if settings.database_url is None:
        from app.core.embedded import start_embedded_postgres

        owner = asyncpg_url(start_embedded_postgres(settings.data_dir))
    else:
        owner = asyncpg_url(settings.database_url)
    if settings.app_database_url is not None:
        app = asyncpg_url(settings.app_database_url)
    else:
        app = owner.set(
            username=settings.app_db_role,
            password=settings.app_db_password.get_secret_value(),
        )
    return DatabaseUrls(owner=owner, app=app)
