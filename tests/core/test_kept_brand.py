"""The brand every HTML page shows is read again only when the content version moves
(services.storefront.brand.kept_brand): a change made by another process shows on the
next page. The answer cache is off, so that every page is rendered."""

from __future__ import annotations

from helpers.clients import new_client
from sqlalchemy import delete, insert

from cmsshop.models import ShopSetting


def test_a_brand_written_by_another_process_shows_on_the_next_page(make_app, engine):
    client = new_client(make_app(**{"cmsshop.answer_cache_ttl": "0"}))
    assert "Kept Brand Shop" not in client.get("/products").text
    assert "Kept Brand Shop" not in client.get("/products").text  # the kept brand
    # Core on another connection: the app's sessions never see this write; the
    # shop_settings trigger moves the content version.
    with engine.begin() as conn:
        conn.execute(insert(ShopSetting), {"key": "brand.shopName", "value": "Kept Brand Shop"})
    assert "Kept Brand Shop" in client.get("/products").text
    assert "Kept Brand Shop" in client.get("/products").text
    with engine.begin() as conn:
        conn.execute(delete(ShopSetting).where(ShopSetting.key == "brand.shopName"))
    assert "Kept Brand Shop" not in client.get("/products").text
