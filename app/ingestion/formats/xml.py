"""XML of untrusted files parsed with defusedxml: no entity expansion (billion laughs), no
external entities or DTD fetches. A hostile part is an `ExtractionError`."""

from __future__ import annotations

from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from app.ingestion.formats.base import ExtractionError


def parse(data: bytes, what: str) -> Element:
    """The root element of `data`; entities and DTDs refused."""
    try:
        root: Element = fromstring(data, forbid_dtd=True)
        return root
    except DefusedXmlException as exc:
        raise ExtractionError(
            f"The {what} declares XML entities or a DTD, which are refused: {type(exc).__name__}."
        ) from exc
    except ParseError as exc:
        raise ExtractionError(f"The {what} is not well-formed XML: {exc}") from exc


def local(tag: str) -> str:
    """A tag's name without its namespace (`{urn:…}p` → `p`)."""
    return tag.rsplit("}", 1)[-1]
