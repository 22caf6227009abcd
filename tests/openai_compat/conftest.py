"""One API server process and its world for the OpenAI-compatible API's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.config import Settings
from tests.openai_compat.world import World, build_world, protocol_server
from tests.server_process import ServerProcess


@pytest.fixture(scope="package")
def server(test_database: Settings) -> Iterator[ServerProcess]:
    yield from protocol_server(test_database)


@pytest.fixture(scope="package")
async def world(test_database: Settings, server: ServerProcess) -> World:
    return await build_world(test_database, server)
