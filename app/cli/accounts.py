"""`threadline tenants|users|api-keys create`: the accounts an operator sets up by hand."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.common import ROLES, run, transaction
from app.config import Settings

tenants_cli = typer.Typer(help="Manage tenants.", no_args_is_help=True)
users_cli = typer.Typer(help="Manage users.", no_args_is_help=True)
api_keys_cli = typer.Typer(help="Manage API keys.", no_args_is_help=True)


@tenants_cli.command("create")
def tenants_create(name: Annotated[str, typer.Argument(help="Tenant name.")]) -> None:
    """Create a tenant and print its id."""
    from app.tenants.service import create_tenant

    async def job(settings: Settings) -> str:
        async with transaction(settings) as db:
            return str((await create_tenant(db, name)).id)

    typer.echo(run(job))


@users_cli.command("create")
def users_create(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    email: Annotated[str, typer.Option(help="E-mail address (the login).")],
    password: Annotated[str, typer.Option(help="Password.", prompt=True, hide_input=True)],
    role: Annotated[str, typer.Option(help="member or admin.")] = "member",
) -> None:
    """Create a user in a tenant and print its id."""
    from app.auth.schemas import normalise_email
    from app.auth.service import create_user
    from app.core.db import scope_to_tenant
    from app.tenants.service import require_tenant

    if role not in ROLES:
        raise typer.BadParameter("role must be 'member' or 'admin'", param_hint="--role")
    try:
        address = normalise_email(email)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--email") from exc

    async def job(settings: Settings) -> str:
        async with transaction(settings) as db:
            found = await require_tenant(db, tenant)
            await scope_to_tenant(db, found.id)
            user = await create_user(
                db, settings, found.id, email=address, password=password, role=role
            )
            return str(user.id)

    typer.echo(run(job))


@api_keys_cli.command("create")
def api_keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    email: Annotated[str, typer.Option(help="The user the key acts as.")],
    name: Annotated[str, typer.Option(help="A label for the key.")],
    role: Annotated[str, typer.Option(help="member or admin (at most the user's).")] = "member",
) -> None:
    """Create an API key acting as a user and print it (it is shown only once)."""
    if role not in ROLES:
        raise typer.BadParameter("role must be 'member' or 'admin'", param_hint="--role")
    from app.auth.principal import Principal
    from app.auth.repository import UserRepository
    from app.auth.service import create_api_key
    from app.core.db import scope_to_tenant
    from app.core.errors import NotFound
    from app.tenants.service import require_tenant

    async def job(settings: Settings) -> str:
        async with transaction(settings) as db:
            found = await require_tenant(db, tenant)
            await scope_to_tenant(db, found.id)
            user = await UserRepository(db, found.id).by_email(email.strip().lower())
            if user is None:
                raise NotFound(f"No user {email!r} in tenant {tenant!r}.")
            owner = Principal(user.id, found.id, user.email, user.role, "token")
            _, raw = await create_api_key(db, owner, name=name, role=role)
            return raw

    typer.echo(run(job))
