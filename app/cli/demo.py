"""`threadline demo`: the demo tenant, its admin and a sample knowledge base, once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import run, transaction
from app.cli.ingest import files_in, ingest_files
from app.config import Settings

DEMO_TENANT = "demo"
DEMO_EMAIL = "admin@demo.example"
DEMO_PASSWORD = "threadline-demo"  # the documented local demo login
SAMPLE_KB = Path(__file__).resolve().parents[1] / "demo" / "kb"


def demo(
    url: Annotated[str, typer.Option(help="Where the server will listen.")] = (
        "http://127.0.0.1:8000"
    ),
) -> None:
    """Create the demo tenant and admin (once) and print how to log in."""
    from app.auth.service import create_user
    from app.core.db import scope_to_tenant
    from app.tenants.repository import find_tenant_by_name
    from app.tenants.service import create_tenant

    async def job(settings: Settings) -> bool:
        async with transaction(settings) as db:
            tenant = await find_tenant_by_name(db, DEMO_TENANT)
            if tenant is not None:
                return False
            tenant = await create_tenant(db, DEMO_TENANT)
            await scope_to_tenant(db, tenant.id)
            await create_user(
                db,
                settings,
                tenant.id,
                email=DEMO_EMAIL,
                password=DEMO_PASSWORD,
                role="admin",
            )
            return True

    created = run(job)
    typer.echo(("Created" if created else "Found") + f" the demo tenant {DEMO_TENANT!r}.")
    counts = run(lambda settings: ingest_files(settings, DEMO_TENANT, files_in([SAMPLE_KB])))
    typer.echo(f"Sample knowledge base: {counts['ready'] + counts['duplicate']} documents.")
    typer.echo(
        f"\nOpen the web app at {url}/ and sign in (API docs: {url}/docs), or log in with:\n"
        f"  curl -s -X POST {url}/auth/token \\\n"
        "       -H 'content-type: application/json' \\\n"
        f'       -d \'{{"email": "{DEMO_EMAIL}", "password": "{DEMO_PASSWORD}"}}\'\n'
        f"  e-mail: {DEMO_EMAIL}   password: {DEMO_PASSWORD}   role: admin\n"
        "Then ask, e.g., 'How do I erase my data?'\n"
    )
