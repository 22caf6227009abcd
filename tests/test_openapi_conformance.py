"""The API does what its OpenAPI document says: schemathesis over every operation.

The application runs in-process (ASGI) on the run's PostgreSQL and Redis, with the scripted
model at the provider boundary. schemathesis drives it from its own event-loop thread, so the
app here is a separate instance with its own lifespan and real commits (`committed`: the rows
are truncated afterwards). Every operation gets the coverage phase (boundary and invalid
values derived from the schema, and unexpected methods) and a fixed number of fuzzed
examples, positive and negative, from a fixed seed.

Authentication: each case carries a bearer token of an admin of a tenant made for this run
(an admin may call every operation). Two operations end the login they are called with, so
each of their cases gets its own: `POST /auth/logout` a fresh login of the admin, `DELETE /me`
a fresh user of the run's tenant. Nothing is excluded.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import schemathesis
from fastapi import FastAPI
from redis.asyncio import Redis
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi import checks
from schemathesis.transport.serialization import Binary
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.core.db import create_sessionmaker
from app.main import UPLOAD_PATHS, create_app
from app.models import User
from tests.chat_helpers import use_model
from tests.conftest import TEST_JWT_SECRET, _delete_keys, truncate_everything
from tests.factories import DEFAULT_PASSWORD, make_tenant, make_user
from tests.fakes import ScriptedChatModel

SEED = 20261122
EXAMPLES_PER_OPERATION = 5

PAGINATED = (
    "/sessions",
    "/sessions/{session_id}/turns",
    "/kb/documents",
    "/admin/audit/turns",
    "/admin/audit/log",
)
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {
            "mode": "all",
            "max-examples": EXAMPLES_PER_OPERATION,
            "deterministic": True,
            "database": "none",
            # Credentials are the run's own (below): generated ones would only test the 401.
            "with-security-parameters": False,
            # PostgreSQL text cannot hold NUL: the API answers 422 `invalid_data` to it
            # everywhere (tests/core/test_errors.py), which no string schema repeats.
            "allow-x00": False,
        },
        # A multipart part is bytes: a "boolean" or "number" file is a file of that text, so
        # the only body of POST /attachments has no invalid variant to reject.
        # A cursor is opaque: one the server did not issue is 400 `invalid_cursor`, and no
        # schema can say which strings it issued.
        "operations": [
            {
                "include-name": "POST /attachments",
                "checks": {"negative_data_rejection": {"enabled": False}},
            },
            {
                "include-name": [f"GET {path}" for path in PAGINATED],
                "checks": {
                    "positive_data_acceptance": {
                        "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429"]
                    }
                },
            },
        ],
        "phases": {
            "examples": {"enabled": True},
            "coverage": {"enabled": True},
            "fuzzing": {"enabled": True},
            "stateful": {"enabled": False},
        },
    }
)
CHECKS = [
    not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.positive_data_acceptance,
    checks.negative_data_rejection,
    checks.unsupported_method,
    checks.allow_header_conformance,
]


@dataclass
class Api:
    app: FastAPI
    client: asgi.ASGIClient
    admin: User
    admin_headers: dict[str, str]
    session_id: str = ""
    erasable: int = 0

    def login(self, email: str) -> dict[str, str]:
        response = self.client.post(
            "/auth/token", json={"email": email, "password": DEFAULT_PASSWORD}
        )
        assert response.status_code == 200, response.text
        return {"Authorization": f"Bearer {response.json()['access_token']}"}

    def headers_for(self, case: schemathesis.Case) -> dict[str, str]:
        """The admin's token; a login of its own for a case that ends the login it uses."""
        if (case.method, case.path) == ("POST", "/auth/logout"):
            return self.login(self.admin.email)
        if (case.method, case.path) == ("DELETE", "/me"):
            return self.login(self.erasable_user())
        return self.admin_headers

    def prepare(self, case: schemathesis.Case) -> None:
        """Valid requests in the sense of rules no JSON Schema can state: a chat names a
        session of the caller and ends with the user's message; an upload is a document."""
        meta = case.meta
        if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict):
            return
        if case.path in ("/chat", "/chat/stream"):
            case.body["session_id"] = self.session_id
            messages = case.body.get("messages")
            if isinstance(messages, list) and messages:
                messages[-1] = {"role": "user", "content": "And then?"}
            key = (case.headers or {}).get("Idempotency-Key")
            if key is not None:  # a key used again with another body is 422, as documented
                case.headers["Idempotency-Key"] = f"{key[:200]}-{uuid.uuid4().hex}"
        if case.path in UPLOAD_PATHS and "file" in case.body:
            case.body["file"] = b"A generated document: " + _raw(case.body["file"]).hex().encode()

    def erasable_user(self) -> str:
        self.erasable += 1
        email = f"erasable-{self.erasable}-{uuid.uuid4().hex[:8]}@example.com"
        response = self.client.post(
            "/admin/users",
            json={"email": email, "password": DEFAULT_PASSWORD},
            headers=self.admin_headers,
        )
        assert response.status_code == 201, response.text
        return email


def _raw(content: object) -> bytes:
    if isinstance(content, Binary):
        return content.data
    return content if isinstance(content, bytes) else str(content).encode()


@pytest.fixture(scope="module")
async def run_settings(test_database: Settings, app_engine: AsyncEngine) -> AsyncIterator[Settings]:
    """The run's own Redis prefix; its rows and keys are removed afterwards."""
    settings = test_database.model_copy(update={"redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:"})
    yield settings
    await truncate_everything(test_database)
    redis = Redis.from_url(test_database.redis_url or "")
    await _delete_keys(redis, settings.redis_prefix)
    await redis.aclose()


@pytest.fixture(scope="module")
async def admin(run_settings: Settings, app_engine: AsyncEngine) -> User:
    async with create_sessionmaker(app_engine)() as db:
        return await make_user(db, await make_tenant(db), role="admin")


@pytest.fixture(scope="module")
def api(run_settings: Settings, admin: User) -> Iterator[Api]:
    app = create_app(run_settings)
    with asgi.get_client(app) as client:  # starts the app's lifespan in schemathesis' loop
        use_model(app, ScriptedChatModel(reply=lambda _: "A scripted answer [1]."))
        served = client.get("/openapi.json").json()
        assert served == DOCUMENT, "the document tested is the one the app serves"
        api = Api(app, client, admin, {})
        api.admin_headers = api.login(admin.email)
        created = client.post("/sessions", json={}, headers=api.admin_headers)
        api.session_id = created.json()["id"]
        yield api
    asgi.shutdown_lifespans()


DOCUMENT = create_app(Settings(env="test", jwt_secret=TEST_JWT_SECRET)).openapi()
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)


@schema.parametrize()
def test_every_operation_conforms_to_the_openapi_document(
    case: schemathesis.Case, api: Api
) -> None:
    api.prepare(case)
    case.call_and_validate(headers=api.headers_for(case), checks=CHECKS, app=api.app)
