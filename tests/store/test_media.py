"""Product images: the admin API and console upload, the stored sizes, /media/<key>, and
what a hostile upload gets (bombs, SVG, EXIF, polyglots, truncated and misnamed files)."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib

import pytest
from helpers.html import errors_of
from helpers.notices import flashed
from helpers.purchases import openapi_validator
from helpers.store import add_currencies, add_product
from PIL import Image
from sqlalchemy import func, select

from cmsshop.models import MediaFile, ProductImage
from cmsshop.services.store import media

IMAGES = "/api/admin/products/site-guard/images"


def png(width=64, height=48, colour=(200, 30, 30, 255), mode="RGBA") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height), colour[: len(mode)]).save(out, "PNG")
    return out.getvalue()


def jpeg(width=64, height=48, exif=None, **kwargs) -> bytes:
    out = io.BytesIO()
    image = Image.new("RGB", (width, height), (20, 120, 200))
    if exif is not None:
        kwargs["exif"] = exif
    image.save(out, "JPEG", **kwargs)
    return out.getvalue()


def webp(width=64, height=48) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 10)).save(out, "WEBP")
    return out.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(side: int = 30_000) -> bytes:
    """A valid PNG of side × side grey pixels: a few KB that would decode to ~900 MB."""
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    compressor = zlib.compressobj(9)
    row = b"\x00" + b"\x00" * side
    body = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", body)
        + png_chunk(b"IEND", b"")
    )


def upload(client, data: bytes, alt="A red square", name="picture.png", status=201, url=IMAGES):
    fields = {"alt": alt} if alt is not None else {}
    return client.post(
        url, fields, upload_files=[("file", name, data)], status=status, expect_errors=status >= 400
    )


@pytest.fixture
def product(dbsession):
    add_currencies(dbsession)
    return add_product(dbsession, "site-guard", name="SiteGuard")


def stored_media(dbsession) -> list[MediaFile]:
    dbsession.rollback()
    return list(dbsession.scalars(select(MediaFile)))


def served(testapp, url: str) -> bytes:
    return testapp.get(url).body


# --- the admin API ------------------------------------------------------------------------


def test_upload_stores_each_size_as_webp_and_a_fallback(admin_app, testapp, product, dbsession):
    response = upload(admin_app, jpeg(2000, 1000))
    body = response.json
    validator = openapi_validator(admin_app, "/api/admin/products/{slug}/images", "post", "201")
    assert not [e.message for e in validator.iter_errors(body)]
    assert (body["width"], body["height"], body["alt"], body["position"]) == (
        2000,
        1000,
        "A red square",
        0,
    )
    assert {name: (s["width"], s["height"]) for name, s in body["sizes"].items()} == {
        "card": (480, 240),
        "page": (1200, 600),
        "og": (1200, 630),
    }
    for size in body["sizes"].values():
        webp_answer = testapp.get(size["webp"])
        assert webp_answer.content_type == "image/webp"
        fallback = testapp.get(size["fallback"])
        assert fallback.content_type == size["fallbackType"] == "image/jpeg"
        with Image.open(io.BytesIO(fallback.body)) as picture:
            assert (picture.format, picture.size) == ("JPEG", (size["width"], size["height"]))
        # The URL names the bytes.
        key = size["webp"].rsplit("/", 1)[1]
        assert key == hashlib.sha256(webp_answer.body).hexdigest() + ".webp"
    assert len(stored_media(dbsession)) == 6
    listed = admin_app.get(IMAGES).json["items"]
    assert [image["id"] for image in listed] == [body["id"]]


def test_media_answers_are_cached_for_good_and_never_sniffed(admin_app, testapp, product):
    url = upload(admin_app, png(colour=(0, 0, 0, 100))).json["sizes"]["card"]["fallback"]
    response = testapp.get(url)
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.content_type == "image/png"  # transparent: a PNG fallback, not JPEG
    etag = response.headers["ETag"]
    assert etag.strip('"') == url.rsplit("/", 1)[1].split(".")[0]
    assert testapp.get(url, headers={"If-None-Match": etag}, status=304).body == b""
    head = testapp.head(url)
    assert head.headers["Content-Length"] == str(len(response.body))


@pytest.mark.parametrize(
    "key",
    [
        "0" * 64 + ".png",  # well formed, not stored
        "0" * 64 + ".svg",
        "../../etc/passwd",
        "A" * 64 + ".png",
        "x.png",
        "..%2F..%2Fsecret.png",
    ],
)
def test_unknown_or_odd_media_keys_are_404(testapp, product, key):
    testapp.get(f"/media/{key}", status=404)


def test_alt_text_is_required_trimmed_and_editable(admin_app, product, dbsession):
    for alt, status in ((None, 422), ("   ", 422), ("x" * 301, 422), ("a\x07b", 422)):
        response = upload(admin_app, png(), alt=alt, status=status)
        assert "alt" in response.json["errors"], response.json
    assert stored_media(dbsession) == []
    image = upload(admin_app, png(), alt="  The   dashboard ").json
    assert image["alt"] == "The dashboard"
    url = f"{IMAGES}/{image['id']}"
    assert admin_app.patch_json(url, {"alt": "Blocked logins"}).json["alt"] == "Blocked logins"
    for body in ({"alt": ""}, {"alt": 5}, {"width": 3}, {"position": -1}, {"position": "1"}):
        admin_app.patch_json(url, body, status=422)


def test_images_are_reordered_and_deleted(admin_app, testapp, product, dbsession):
    ids = [
        upload(admin_app, png(colour=(i * 40, 0, 0, 255)), alt=f"n{i}").json["id"] for i in range(3)
    ]
    body = admin_app.patch_json(f"{IMAGES}/{ids[2]}", {"position": 0}).json
    assert body["position"] == 0
    assert [i["id"] for i in admin_app.get(IMAGES).json["items"]] == [ids[2], ids[0], ids[1]]
    # Past the end: last.
    admin_app.patch_json(f"{IMAGES}/{ids[2]}", {"position": 1000})
    assert [i["id"] for i in admin_app.get(IMAGES).json["items"]] == [ids[0], ids[1], ids[2]]
    kept_urls = admin_app.get(IMAGES).json["items"][0]["sizes"]["card"]["webp"]
    gone = admin_app.get(IMAGES).json["items"][1]["sizes"]["card"]["webp"]
    assert admin_app.delete(f"{IMAGES}/{ids[1]}").json == {"id": ids[1], "deleted": True}
    items = admin_app.get(IMAGES).json["items"]
    assert [(i["id"], i["position"]) for i in items] == [(ids[0], 0), (ids[2], 1)]
    testapp.get(gone, status=404)  # its renditions went with it
    testapp.get(kept_urls)
    admin_app.delete(f"{IMAGES}/{ids[1]}", status=404)
    admin_app.patch_json(f"{IMAGES}/99999", {"alt": "x"}, status=404)
    admin_app.patch_json(f"{IMAGES}/abc", {"alt": "x"}, status=404)


def test_the_same_picture_on_two_products_shares_its_files(admin_app, testapp, dbsession):
    add_currencies(dbsession)
    add_product(dbsession, "site-guard")
    add_product(dbsession, "theme-pack")
    data = png()
    first = upload(admin_app, data).json
    upload(admin_app, data, status=422)  # twice on one product: refused
    second = upload(admin_app, data, url="/api/admin/products/theme-pack/images").json
    assert first["sizes"] == second["sizes"]
    admin_app.delete(f"{IMAGES}/{first['id']}")
    # The other product's image still has its files.
    for size in second["sizes"].values():
        testapp.get(size["webp"])
        testapp.get(size["fallback"])


def test_only_admins_with_a_token_may_change_images(testapp, customer_app, admin_app, product):
    image = upload(admin_app, png()).json
    url = f"{IMAGES}/{image['id']}"
    testapp.get(IMAGES, status=401)
    customer_app.get(IMAGES, status=403)
    customer_app.patch_json(url, {"alt": "x"}, status=403)
    customer_app.delete(url, status=403)
    response = admin_app.patch_json(
        url, {"alt": "x"}, headers={"X-CSRF-Token": "wrong"}, status=403
    )
    assert response.json["code"] == "csrf_failed"
    response = admin_app.post(
        IMAGES,
        {"alt": "x"},
        upload_files=[("file", "a.png", png())],
        headers={"X-CSRF-Token": ""},
        status=403,
    )
    assert response.json["code"] == "csrf_failed"


def test_an_upload_must_be_multipart_with_a_file(admin_app, product):
    response = admin_app.post_json(IMAGES, {"alt": "x"}, status=415)
    assert response.json["code"] == "unsupported_media_type"
    response = admin_app.post(
        IMAGES, {"alt": "x", "file": "not a file"}, content_type="multipart/form-data", status=422
    )
    assert "file" in response.json["errors"]
    admin_app.post(
        "/api/admin/products/nope/images",
        {"alt": "x"},
        upload_files=[("file", "a.png", png())],
        status=404,
    )


# --- hostile uploads ----------------------------------------------------------------------


def refused(admin_app, data: bytes, name="picture.png") -> str:
    response = upload(admin_app, data, name=name, status=422)
    assert set(response.json["errors"]) == {"file"}, response.json
    return response.json["errors"]["file"]


def test_a_png_decompression_bomb_is_refused_before_decoding(admin_app, product, dbsession):
    bomb = png_bomb()
    assert len(bomb) < 1024 * 1024
    assert refused(admin_app, bomb) == f"at most {media.MAX_SIDE} × {media.MAX_SIDE} pixels"
    assert stored_media(dbsession) == []


def test_svg_gif_and_html_are_refused(admin_app, product, dbsession):
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    assert refused(admin_app, svg, "logo.svg") == "only PNG, JPEG and WebP images"
    gif = io.BytesIO()
    Image.new("RGB", (4, 4)).save(gif, "GIF")
    assert refused(admin_app, gif.getvalue(), "x.gif") == "only PNG, JPEG and WebP images"
    # GIF+JS polyglot: a GIF header that is also a script.
    refused(admin_app, b"GIF89a/*\x01\x00\x01\x00\x00\x00\x00*/=1;alert(1)//", "x.png")
    refused(admin_app, b"<!doctype html><script>alert(1)</script>", "x.jpg")
    assert stored_media(dbsession) == []


def test_a_truncated_file_is_refused(admin_app, product, dbsession):
    for data in (png(300, 300)[:-40], jpeg(300, 300)[:-200], webp(300, 300)[:-30]):
        assert refused(admin_app, data).startswith("not a readable")
    assert stored_media(dbsession) == []


def test_the_extension_does_not_matter_only_the_bytes(admin_app, testapp, product):
    # A JPEG called .png is a JPEG; a PNG called .exe is a PNG: the name is never used.
    body = upload(admin_app, jpeg(), name="photo.png").json
    assert testapp.get(body["sizes"]["card"]["fallback"]).content_type == "image/jpeg"
    body = upload(admin_app, png(colour=(0, 0, 0, 128)), name="evil.exe").json
    assert testapp.get(body["sizes"]["card"]["fallback"]).content_type == "image/png"
    # And a file claiming to be an image by name only is refused.
    refused(admin_app, b"MZ\x90\x00 not an image", "x.jpg")


def test_exif_is_stripped_and_orientation_applied(admin_app, testapp, product):
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    exif[0x010F] = "SecretCam"  # camera make
    exif[0x8825] = {2: (52.0, 31.0, 12.0)}  # GPS latitude
    data = jpeg(200, 100, exif=exif.tobytes())
    assert b"SecretCam" in data
    body = upload(admin_app, data).json
    assert (body["width"], body["height"]) == (100, 200)  # upright
    for size in body["sizes"].values():
        for url in (size["webp"], size["fallback"]):
            stored = served(testapp, url)
            assert b"SecretCam" not in stored and b"Exif" not in stored
            with Image.open(io.BytesIO(stored)) as picture:
                assert not picture.getexif()
                assert "icc_profile" not in picture.info


def with_app_segments(data: bytes, count: int, size: int = 60_000) -> bytes:
    """A JPEG with ``count`` more APP1 segments of ``size`` bytes after its SOI."""
    segment = b"\xff\xe1" + struct.pack(">H", size + 2) + b"Exif\x00\x00" + b"x" * (size - 6)
    return data[:2] + segment * count + data[2:]


def test_a_huge_exif_block_is_refused(admin_app, product, dbsession):
    # One JPEG segment holds at most 64 KB; a huge EXIF block spreads over many of them.
    data = with_app_segments(jpeg(80, 80), 6)
    assert len(data) > media.MAX_METADATA
    assert "metadata" in refused(admin_app, data, name="photo.jpg")
    assert stored_media(dbsession) == []


def test_exif_within_the_limit_is_stripped(admin_app, testapp, product):
    # A 60 KB description, as much as one segment carries: accepted, and not served.
    exif = Image.Exif()
    exif[0x010E] = "x" * 60_000  # ImageDescription
    data = jpeg(80, 80, exif=exif.tobytes())
    assert len(data) > 60_000
    body = upload(admin_app, data).json
    stored = served(testapp, body["sizes"]["page"]["fallback"])
    assert len(stored) < 10_000 and b"xxxxxxxx" not in stored


def test_over_the_byte_limit_is_413(admin_app, product, dbsession):
    padded = jpeg() + b"\x00" * (media.MAX_BYTES + 1)
    response = upload(admin_app, padded, status=413)
    assert response.json["code"] == "payload_too_large"
    assert stored_media(dbsession) == []


@pytest.mark.parametrize(
    "tail",
    [
        b"<html><script>alert(document.cookie)</script></html>",
        # A ZIP's end of central directory: a JPEG that is also an archive.
        b"PK\x05\x06" + b"\x00" * 18,
    ],
)
def test_polyglots_are_refused(admin_app, product, dbsession, tail):
    # HTML or a ZIP directory appended after the image's own end (JPEG's end-of-image
    # marker, PNG's IEND, the size WebP's RIFF header states).
    for image in (jpeg(), png(), webp()):
        assert refused(admin_app, image + tail) == "the file holds more than a picture"
    assert stored_media(dbsession) == []


def test_an_html_comment_inside_a_png_is_not_served(admin_app, testapp, product):
    # A tEXt chunk carrying HTML (a classic PNG/HTML polyglot): dropped with the metadata.
    data = png()
    payload = png_chunk(b"tEXt", b"Comment\x00<script>alert(1)</script>")
    data = data[:33] + payload + data[33:]
    body = upload(admin_app, data).json
    for size in body["sizes"].values():
        assert b"<script" not in served(testapp, size["fallback"])


def test_an_animation_is_refused(admin_app, product):
    frames = [Image.new("RGB", (8, 8), (i * 60, 0, 0)) for i in range(3)]
    out = io.BytesIO()
    frames[0].save(out, "WEBP", save_all=True, append_images=frames[1:])
    assert refused(admin_app, out.getvalue()) == "a still image, not an animation"


# --- the console -------------------------------------------------------------------------


def test_console_upload_alt_order_and_delete(admin_pages, product, dbsession):
    page = admin_pages.get("/admin/products/site-guard/edit")
    form = page.forms["image-upload"]
    form["alt"] = ""
    form["file"] = ("a.png", png())
    response = form.submit(status=422)
    assert set(errors_of(response)) == {"alt"}
    form = response.forms["image-upload"]
    form["alt"] = "A red square"
    form["file"] = ("a.svg", b"<svg/>")
    response = form.submit(status=422)
    assert errors_of(response)["image-file"] == "only PNG, JPEG and WebP images"
    assert response.forms["image-upload"]["alt"].value == "A red square"
    for n in range(2):
        form = admin_pages.get("/admin/products/site-guard/edit").forms["image-upload"]
        form["alt"] = f"Picture {n}"
        form["file"] = (f"{n}.png", png(colour=(n * 90, 10, 10, 255)))
        response = form.submit(status=303)
        assert response.location.endswith("/admin/products/site-guard/edit#images")
        assert flashed(response) == "image_added"
    page = response.follow()
    assert "The image was added." in page.text
    alts = [img.attrs["alt"] for img in page.html.select("#images .image-thumb img")]
    assert alts == ["Picture 0", "Picture 1"]
    ids = [
        int(i.id) for i in dbsession.scalars(select(ProductImage).order_by(ProductImage.position))
    ]

    # Move the second up, then rename it, then delete the first.
    forms = [f for f in page.forms.values() if f.action.endswith(f"/images/{ids[1]}")]
    up = next(f for f in forms if f.get("action").value == "up")
    assert flashed(up.submit(status=303)) == "image_moved"
    page = admin_pages.get("/admin/products/site-guard/edit")
    alts = [img.attrs["alt"] for img in page.html.select("#images .image-thumb img")]
    assert alts == ["Picture 1", "Picture 0"]
    rename = next(
        f
        for f in page.forms.values()
        if f.action.endswith(f"/images/{ids[1]}") and f.get("action").value == "alt"
    )
    rename["alt"] = " "
    response = rename.submit(status=422)
    assert response.html.select_one(f"#f-alt-{ids[1]}-error") is not None
    rename["alt"] = "The first picture"
    assert flashed(rename.submit(status=303)) == "image_saved"
    page = admin_pages.get("/admin/products/site-guard/edit")
    delete = next(
        f
        for f in page.forms.values()
        if f.action.endswith(f"/images/{ids[0]}") and f.get("action").value == "delete"
    )
    assert flashed(delete.submit(status=303)) == "image_deleted"
    dbsession.rollback()
    images = list(dbsession.scalars(select(ProductImage)))
    assert [(i.id, i.alt, i.position) for i in images] == [(ids[1], "The first picture", 0)]
    # A small picture's card and page sizes are the same bytes: one row each, 2 + 2.
    assert dbsession.scalar(select(func.count()).select_from(MediaFile)) == 4


# --- the storefront ----------------------------------------------------------------------


def test_cards_and_the_product_page_show_pictures_and_og_image(admin_app, testapp, product):
    first = upload(admin_app, jpeg(1600, 900), alt="The dashboard").json
    upload(admin_app, png(), alt="The settings")
    listing = testapp.get("/products")
    card = listing.html.select_one(".card picture")
    assert card.select_one("source")["type"] == "image/webp"
    assert card.select_one("source")["srcset"] == first["sizes"]["card"]["webp"]
    img = card.select_one("img")
    assert img["src"] == first["sizes"]["card"]["fallback"]
    assert (img["width"], img["height"], img["alt"], img["loading"]) == (
        "480",
        "270",
        "The dashboard",
        "lazy",
    )
    page = testapp.get("/products/site-guard")
    pictures = page.html.select(".product-gallery picture img")
    assert [p["alt"] for p in pictures] == ["The dashboard", "The settings"]
    assert "loading" not in pictures[0].attrs and pictures[1]["loading"] == "lazy"
    og = page.html.select_one('meta[property="og:image"]')["content"]
    assert og == "http://localhost" + first["sizes"]["og"]["fallback"]
    assert page.html.select_one('meta[property="og:image:alt"]')["content"] == "The dashboard"


def test_a_product_without_images_has_no_picture_markup(testapp, product):
    page = testapp.get("/products/site-guard")
    assert page.html.select("picture") == []
    assert page.html.select_one('meta[property="og:image"]') is None
    assert testapp.get("/products").html.select(".card picture") == []
