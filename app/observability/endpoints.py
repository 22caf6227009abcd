from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

router = APIRouter(tags=["ops"])


@router.get("/metrics", response_class=Response)
async def metrics() -> Response:
    """Prometheus metrics of this process (text exposition format)."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
