"""Numbers and date-times in requests, as their JSON Schema types mean them.

Pydantic's lax mode turns `true` into 1 and `"18"` into 18, which the OpenAPI document calls
invalid; strict mode refuses `18.0`, which JSON Schema calls an integer. These accept exactly
the JSON numbers the schema allows (an integer-valued number for an integer).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, JsonValue

JsonObject = dict[str, JsonValue]
"""A JSON object whose content is arbitrary (a client's metadata, a JSONB column, a schema
fragment). Not for data of a known shape: that has a TypedDict or a model of its own."""


def json_number(value: Any) -> Any:
    """A `mode="before"` field validator: refuses what only lax mode would make a number.
    (A validator on the field, not the type, keeps `ge`/`le` in the JSON Schema.)"""
    if isinstance(value, bool | str | bytes):
        raise ValueError("must be a JSON number")
    return value


def _a_timestamp(value: Any) -> Any:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
    raise ValueError("must be an ISO 8601 date-time")


DateTimeParam = Annotated[datetime, BeforeValidator(_a_timestamp)]
"""A date-time query parameter: ISO 8601 only (not a Unix time, which pydantic would take)."""


# PostgreSQL text and jsonb cannot hold NUL: text that is stored or searched states so in its
# schema, and pydantic refuses it with the same pattern (422) before anything is written.
NO_NUL = r"^[^\x00]*$"
# A text document: no C0 control character but tab, newlines and form feed (which the upload
# sniffer answers with 415 `unsupported_file_type`, found in the first 65,536 characters).
TEXT_FILE_PATTERN = r"^[^\x00-\x08\x0b\x0e-\x1f]*$"
# An uploaded file, which a binary schema cannot describe further.
UPLOADED_FILE: JsonObject = {
    "minLength": 1,
    "description": "A file typed by its content, never its name (ADR 0074): PDF, Word "
    "(.docx), PowerPoint (.pptx), Excel (.xlsx), OpenDocument text (.odt), EPUB, or UTF-8 "
    "text without control characters but tab, newlines and form feed (e-mail .eml, HTML, "
    "CSV, JSON, Markdown, plain text). An empty file is 422 `empty_file`, anything else 415 "
    "`unsupported_file_type`.",
}
# The media types an uploaded file's part may be (multipart `encoding`); the content decides.
UPLOAD_MEDIA_TYPES = {
    "contentType": "application/pdf, text/plain, text/markdown, text/html, text/csv, "
    "application/json, message/rfc822, application/epub+zip, "
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document, "
    "application/vnd.openxmlformats-officedocument.presentationml.presentation, "
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet, "
    "application/vnd.oasis.opendocument.text"
}
# Any JSON without NUL in a string or a key (jsonb cannot hold it either): a component of
# the document (app/core/openapi.py), for the JSON objects a client stores (`metadata`).
JSON_WITHOUT_NUL = "JsonWithoutNul"
JSON_WITHOUT_NUL_SCHEMA: JsonObject = {
    "anyOf": [
        {"type": ["null", "boolean", "number"]},
        {"type": "string", "pattern": NO_NUL},
        {"type": "array", "items": {"$ref": f"#/components/schemas/{JSON_WITHOUT_NUL}"}},
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": {"$ref": f"#/components/schemas/{JSON_WITHOUT_NUL}"},
        },
    ],
    "description": "Any JSON value without NUL in a string or a key (422 `invalid_data`).",
}
# A JSON object of that kind. Pydantic cannot generate a `$ref` to a component it does not
# know, so a field's `json_schema_extra` is this mark, which app/core/openapi.py replaces.
JSON_OBJECT_WITHOUT_NUL_MARK = "x-json-object-without-nul"
JSON_OBJECT_WITHOUT_NUL: JsonObject = {JSON_OBJECT_WITHOUT_NUL_MARK: True}
JSON_OBJECT_WITHOUT_NUL_SCHEMA: JsonObject = {
    "propertyNames": {"pattern": NO_NUL},
    "additionalProperties": {"$ref": f"#/components/schemas/{JSON_WITHOUT_NUL}"},
}
# Not blank either: a character other than whitespace, and no NUL anywhere.
NOT_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"
