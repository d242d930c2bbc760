"""``GET /ui`` and its assets, served by the tracker app itself (no browser needed)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest

from testsupport.services import in_process
from tracker_service import create_app
from tracker_service.settings import Settings
from tracker_service.ui.routes import ASSETS, PAGES


def settings(tmp_path: Any, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "tracker_database_url": f"sqlite+aiosqlite:///{tmp_path}/tracker.db",
        "data_dir": tmp_path,
        "tracker_projector": False,
        "tracker_timeouts": False,
        **overrides,
    }
    return Settings(**values)


def test_every_shipped_file_is_served_and_every_served_file_is_shipped():
    shipped = {
        p.name
        for p in resources.files("tracker_service.ui").joinpath("static").iterdir()
        if p.is_file()
    }
    assert shipped == set(ASSETS) | set(PAGES)


@pytest.mark.asyncio
async def test_pages_and_assets_come_from_the_package_with_a_strict_csp(tmp_path):
    async with in_process(create_app(settings(tmp_path))) as client:
        listing = await client.get("/ui")
        assert listing.status_code == 200
        assert listing.headers["content-type"].startswith("text/html")
        assert "ui/assets/plans.js" in listing.text
        csp = listing.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert listing.headers["x-content-type-options"] == "nosniff"

        plan = await client.get("/ui/plans/7c1e%20plan")
        assert plan.status_code == 200 and "../assets/plan.js" in plan.text

        slash = await client.get("/ui/", follow_redirects=True)
        assert slash.status_code == 200 and str(slash.url).endswith("/ui")

        for name, media_type in ASSETS.items():
            asset = await client.get(f"/ui/assets/{name}")
            assert asset.status_code == 200, name
            assert asset.headers["content-type"] == media_type
            assert "cdn" not in asset.text.lower() and "https://" not in asset.text


@pytest.mark.asyncio
async def test_unknown_assets_are_404_naming_them_and_never_reach_the_filesystem(tmp_path):
    async with in_process(create_app(settings(tmp_path))) as client:
        for name in ("nope.js", "plans.html", "%2E%2E"):
            response = await client.get(f"/ui/assets/{name}")
            assert response.status_code == 404, name
            error = response.json()["error"]
            assert error["code"] == "not_found" and "no UI asset" in error["message"]
        # Slashes never reach the handler at all.
        response = await client.get("/ui/assets/..%2Froutes.py")
        assert response.status_code == 404 and "tracker_service" not in response.text


@pytest.mark.asyncio
async def test_config_tells_the_pages_which_identity_to_ask_for(tmp_path):
    async with in_process(create_app(settings(tmp_path))) as client:
        assert (await client.get("/ui/config.json")).json() == {
            "auth_mode": "dev",
            "default_tenant": "default",
        }
    jwt = settings(tmp_path, auth_mode="jwt", jwt_secret="s" * 32)
    async with in_process(create_app(jwt)) as client:
        # The page itself needs no token (it asks for one); the API does.
        assert (await client.get("/ui")).status_code == 200
        assert (await client.get("/ui/config.json")).json()["auth_mode"] == "jwt"
        assert (await client.get("/v1/tracker/plans")).status_code == 401
