"""The error responses of every operation, documented from what each route depends on.

A route's own `responses=` name the errors of its logic (409 for a conflict, 429 for a
limit); the errors every route of a kind can give are added here, so the OpenAPI document
says what the API does without each decorator repeating them:

- a body: 400 (malformed), 413 (too large), 415 (not JSON, a form or an upload), 422;
- a path parameter: 404 (not found, or another tenant's or user's object), 422;
- a query or header parameter: 422;
- a dependency listed in `by_dependency` (authentication: 401, and 429 when the credential
  has too many requests in progress, ADR 0093; the admin role: 403; the database: 503 when
  its pool is exhausted or it is unreachable).

Every error has the body `{"error": {"code", "message", "request_id"}}` (`ErrorResponse`),
which replaces FastAPI's default 422 schema (the API never answers with that shape).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from app.core.errors import ErrorResponse, error_responses
from app.core.json_types import (
    JSON_OBJECT_WITHOUT_NUL_MARK,
    JSON_OBJECT_WITHOUT_NUL_SCHEMA,
    JSON_WITHOUT_NUL,
    JSON_WITHOUT_NUL_SCHEMA,
)

_SCHEMA_REF = "#/components/schemas/{model}"


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def _params(dependant: Dependant, kind: str) -> bool:
    return bool(getattr(dependant, kind)) or any(
        _params(sub, kind) for sub in dependant.dependencies
    )


def route_errors(
    route: APIRoute, by_dependency: Mapping[Callable[..., Any], tuple[int, ...]]
) -> set[int]:
    """The error statuses a route can answer with, whatever its endpoint does."""
    dependant = route.dependant
    statuses: set[int] = set()
    for call in _calls(dependant):
        statuses.update(by_dependency.get(call, ()))
    has_body = _params(dependant, "body_params") or "requestBody" in (route.openapi_extra or {})
    if has_body:
        statuses.update((400, 413, 415, 422))
    if _params(dependant, "path_params"):
        statuses.update((404, 422))
    if _params(dependant, "query_params") or _params(dependant, "header_params"):
        statuses.add(422)
    return statuses


def document_errors(
    app: FastAPI, by_dependency: Mapping[Callable[..., Any], tuple[int, ...]]
) -> None:
    """Add the derived error responses to each route's documentation (its own win)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        error_schema = ErrorResponse.model_json_schema(ref_template=_SCHEMA_REF)
        schemas.update(error_schema.pop("$defs", {}))
        schemas.setdefault("ErrorResponse", error_schema)
        schemas.setdefault(JSON_WITHOUT_NUL, JSON_WITHOUT_NUL_SCHEMA)
        _mark_json_without_nul(document)
        for context in iter_route_contexts(app.routes):
            route = context.original_route
            operations = document["paths"].get(context.path_format or "", {})
            if not isinstance(route, APIRoute) or not route.include_in_schema:
                continue
            derived = route_errors(route, by_dependency)
            for method in route.methods or ():
                _add_errors(operations[method.lower()], derived, declared=route.responses)
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = document
        return document

    # Replacing `app.openapi` is FastAPI's documented hook for extending the schema; mypy
    # sees an assignment to a method.
    app.openapi = openapi  # type: ignore[method-assign]


def _add_errors(operation: dict[str, Any], statuses: set[int], declared: Mapping[Any, Any]) -> None:
    responses = operation.setdefault("responses", {})
    if "422" in responses:  # FastAPI's own, for any parameter: replaced by the real shape
        statuses = {*statuses, 422}
    for status, doc in error_responses(*sorted(statuses)).items():
        if status in declared or str(status) in declared:
            continue
        responses[str(status)] = {
            "description": doc["description"],
            "content": {
                "application/json": {"schema": {"$ref": _SCHEMA_REF.format(model="ErrorResponse")}}
            },
        }


def _mark_json_without_nul(node: Any) -> None:
    """Objects marked `JSON_OBJECT_WITHOUT_NUL` get their schema (a `$ref` to the component)."""
    if isinstance(node, dict):
        if node.pop(JSON_OBJECT_WITHOUT_NUL_MARK, False):
            node.update(JSON_OBJECT_WITHOUT_NUL_SCHEMA)
        for value in node.values():
            _mark_json_without_nul(value)
    elif isinstance(node, list):
        for value in node:
            _mark_json_without_nul(value)
