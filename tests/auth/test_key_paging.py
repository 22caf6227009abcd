"""GET /admin/api-keys?limit=N: the keys a page at a time, newest first, the next page named
by `Link: <…>; rel="next"`; without `limit`, the whole list as before."""

from __future__ import annotations

import re

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import login, make_tenant, make_user

_NEXT = re.compile(r'^<(/admin/api-keys\?[^>]+)>; rel="next"$')


async def test_keys_are_paged_newest_first_each_once(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    other = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    names = [f"key-{i}" for i in range(5)]
    for name in names:
        created = await client.post("/admin/api-keys", json={"name": name}, headers=admin.headers)
        assert created.status_code == 201
    await client.post("/admin/api-keys", json={"name": "theirs"}, headers=other.headers)

    whole = await client.get("/admin/api-keys", headers=admin.headers)
    assert [k["name"] for k in whole.json()] == names[::-1]
    assert "link" not in whole.headers

    seen: list[str] = []
    url: str | None = "/admin/api-keys?limit=2"
    pages = 0
    while url and pages < 10:
        page = await client.get(url, headers=admin.headers)
        assert page.status_code == 200, page.text
        assert len(page.json()) <= 2
        seen += [k["name"] for k in page.json()]
        link = page.headers.get("link")
        found = _NEXT.fullmatch(link) if link else None
        assert link is None or found, link
        url = found.group(1) if found else None
        pages += 1
    assert seen == names[::-1]
    assert pages == 3

    bad = await client.get("/admin/api-keys?limit=2&cursor=nope", headers=admin.headers)
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_cursor"
