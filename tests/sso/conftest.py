"""Fixtures of the SSO tests: real OpenID providers on loopback, and settings a plain-HTTP
test client can carry cookies under."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from tests.sso.provider import OpenIdProvider, install


@pytest.fixture(scope="session")
def node() -> str:
    return install()


def _provider(node: str, directory: Path, clock_offset: int = 0) -> Iterator[OpenIdProvider]:
    provider = OpenIdProvider(node, directory / "accounts.json", clock_offset_seconds=clock_offset)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture(scope="session")
def op(node: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenIdProvider]:
    """The identity provider the tenants under test use."""
    yield from _provider(node, tmp_path_factory.mktemp("op"))


@pytest.fixture(scope="session")
def other_op(node: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenIdProvider]:
    """Another provider, with the same client registrations: an issuer nobody configured."""
    yield from _provider(node, tmp_path_factory.mktemp("other-op"))


@pytest.fixture
def rotating_op(node: str, tmp_path: Path) -> Iterator[OpenIdProvider]:
    """A provider of the test's own, which the test restarts with new keys."""
    yield from _provider(node, tmp_path)


@pytest.fixture
def lagging_op(node: str, tmp_path: Path) -> Iterator[OpenIdProvider]:
    """A provider whose clock is five minutes behind: what it issues for a short while has
    expired by the time it arrives."""
    yield from _provider(node, tmp_path, clock_offset=-300)


@pytest.fixture
async def settings(test_database: Settings) -> Settings:
    # The test client speaks plain HTTP: cookies without `Secure`, as in development.
    return test_database.model_copy(
        update={"redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:", "web_cookie_secure": False}
    )
