"""``GET /ui``: the tracker's web pages and their static assets, shipped as package data.

The pages are static HTML + vanilla JS (no CDN, no build step): the browser calls the
tracker's own API (``/v1/tracker/...``) with the identity the user picked (dev mode:
``X-Tenant-ID``; jwt mode: a bearer token), so the UI sees exactly what the API lets the
caller see. Nothing here touches tenant data.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from soorma_common.errors import NotFound

router = APIRouter(include_in_schema=False)

# Every asset the pages load, with its media type: anything else is a 404, so no path
# from the URL ever reaches the filesystem.
ASSETS = {
    "app.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "graph.js": "text/javascript; charset=utf-8",
    "waterfall.js": "text/javascript; charset=utf-8",
    "plans.js": "text/javascript; charset=utf-8",
    "plan.js": "text/javascript; charset=utf-8",
    "agents.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
PAGES = ("plans.html", "plan.html", "agents.html")

# Defence in depth behind the escaping in the JS: no inline script, no foreign origin.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@lru_cache(maxsize=len(ASSETS) + len(PAGES))
def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _file(name: str, media_type: str) -> Response:
    return Response(_read(name), media_type=media_type, headers=SECURITY_HEADERS)


@router.get("/ui")
async def plans_page() -> Response:
    """The plans list."""
    return _file("plans.html", "text/html; charset=utf-8")


@router.get("/ui/")
async def plans_page_slash() -> Response:
    return RedirectResponse("../ui", status_code=307)


@router.get("/ui/plans/{plan_id}")
async def plan_page(plan_id: str) -> Response:
    """One plan (the page reads the id from its URL)."""
    return _file("plan.html", "text/html; charset=utf-8")


@router.get("/ui/agents")
async def agents_page() -> Response:
    """The connected agents: heartbeats and consumer lag."""
    return _file("agents.html", "text/html; charset=utf-8")


@router.get("/ui/agents/")
async def agents_page_slash() -> Response:
    return RedirectResponse("../agents", status_code=307)


@router.get("/ui/assets/{name}")
async def asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no UI asset {name[:64]!r}", details={"asset": name[:64]})
    return _file(name, media_type)


@router.get("/ui/config.json")
async def config(request: Request) -> dict[str, str]:
    """What the pages need to know to call the API: the identity mode."""
    settings = request.app.state.settings
    return {"auth_mode": settings.auth_mode, "default_tenant": settings.default_tenant}
