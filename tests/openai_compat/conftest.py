"""One API server process and its world for the OpenAI-compatible API's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from app.config import Settings
from tests.conftest import truncate_everything
from tests.openai_compat.world import World, build_world, protocol_server
from tests.server_process import ServerProcess


@pytest.fixture(scope="package")
def server(test_database: Settings) -> Iterator[ServerProcess]:
    yield from protocol_server(test_database)


@pytest.fixture(scope="package")
async def world(test_database: Settings, server: ServerProcess) -> AsyncIterator[World]:
    yield await build_world(test_database, server)
    # The package's rows were committed in the run's shared database: later tests (the
    # audit log's, erasure's) must find it as empty as committed tests leave it.
    await truncate_everything(test_database)
