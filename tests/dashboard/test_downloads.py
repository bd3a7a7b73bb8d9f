"""The signed, cookie-less download route: tokens, streaming, ranges, delivery modes, log."""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import hashlib
import hmac
import os
import threading
import time
from urllib.parse import unquote

import pytest
import requests
from helpers.app import TEST_SECRET, serve
from helpers.clients import new_client
from helpers.downloads import CONTENT, logs, signed_path
from helpers.purchases import make_purchase, set_entitlement_status
from pyramid.scripting import prepare
from sqlalchemy import select

from cmsshop.models import ErrorRecord, Release
from cmsshop.services.dashboard.downloads import (
    CHUNK_SIZE,
    AccelRedirectDelivery,
    ByteRange,
    DownloadTokenSigner,
    FileRangeIter,
    IFileDelivery,
    RangeNotSatisfiable,
    StreamDelivery,
    content_disposition,
    if_range_matches,
    parse_range,
    safe_relative_path,
)
from cmsshop.util import utcnow

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.fixture
def purchase(dbsession, customer, storage_dir):
    return make_purchase(dbsession, customer, storage_dir, content=CONTENT)


def download_signer(app) -> DownloadTokenSigner:
    """The app's signer service, as a view finds it."""
    env = prepare(registry=app.registry)
    try:
        return env["request"].find_service(DownloadTokenSigner)
    finally:
        env["closer"]()


# --- the whole file ----------------------------------------------------------------------


def test_download_needs_no_cookie_and_sends_file_headers(app, customer_app, purchase, dbsession):
    path = signed_path(customer_app, purchase)
    anonymous = new_client(app)  # no cookie, no CSRF token: like curl
    response = anonymous.get(path, headers={"User-Agent": "curl/8.5"})
    assert response.status_int == 200
    assert response.body == CONTENT
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert response.headers["Content-Length"] == str(len(CONTENT))
    assert response.headers["ETag"] == f'"{hashlib.sha256(CONTENT).hexdigest()}"'
    assert response.headers["Accept-Ranges"] == "bytes"
    assert response.headers["Content-Disposition"] == (
        f'attachment; filename="{purchase.release.file_name}"'
    )
    assert response.headers["Cache-Control"] == "private, no-store"
    assert "Set-Cookie" not in response.headers
    [entry] = logs(dbsession)
    assert entry.entitlement_id == purchase.entitlement.id
    assert entry.release_id == purchase.release.id
    assert entry.version == "1.0.0"
    assert entry.ip == "127.0.0.1"
    assert entry.user_agent == "curl/8.5"
    assert (entry.status, entry.range_start, entry.range_end) == (200, None, None)
    assert entry.content_length == len(CONTENT)
    assert entry.delivery == "stream"
    assert abs(entry.created_at - utcnow()) < dt.timedelta(minutes=5)


def test_the_url_works_more_than_once_until_it_expires(app, customer_app, purchase, dbsession):
    path = signed_path(customer_app, purchase)
    anonymous = new_client(app)
    assert anonymous.get(path).body == CONTENT
    assert anonymous.get(path).body == CONTENT
    assert len(logs(dbsession)) == 2


def test_head_sends_headers_only_and_is_not_logged(app, customer_app, purchase, dbsession):
    path = signed_path(customer_app, purchase)
    response = new_client(app).head(path)
    assert response.status_int == 200
    assert response.headers["Content-Length"] == str(len(CONTENT))
    assert response.body == b""
    assert logs(dbsession) == []


# --- ranges ------------------------------------------------------------------------------


def test_single_range_gives_206(app, customer_app, purchase, dbsession):
    path = signed_path(customer_app, purchase)
    client = new_client(app)
    size = len(CONTENT)
    for header, start, end in [
        ("bytes=0-9", 0, 9),
        ("bytes=100-", 100, size - 1),
        ("bytes=-5", size - 5, size - 1),
        ("bytes=-999999", 0, size - 1),
        ("bytes=10000-999999", 10000, size - 1),
        ("BYTES = 7 - 7", 7, 7),
    ]:
        response = client.get(path, headers={"Range": header})
        assert response.status_int == 206, header
        assert response.body == CONTENT[start : end + 1]
        assert response.headers["Content-Range"] == f"bytes {start}-{end}/{size}"
        assert response.headers["Content-Length"] == str(end - start + 1)
        entry = logs(dbsession)[-1]
        assert (entry.status, entry.range_start, entry.range_end) == (206, start, end)
        assert entry.content_length == end - start + 1


def test_ignored_range_headers_send_the_whole_file(app, customer_app, purchase):
    path = signed_path(customer_app, purchase)
    client = new_client(app)
    for header in [
        "bytes=9-3",
        "items=0-5",
        "bytes=0-1,4-5",
        "bytes=-",
        "bytes=abc",
        "bytes=1-2-3",
    ]:
        response = client.get(path, headers={"Range": header})
        assert response.status_int == 200, header
        assert response.body == CONTENT


def test_unsatisfiable_range_is_416_json(app, customer_app, purchase, dbsession):
    path = signed_path(customer_app, purchase)
    client = new_client(app)
    for header in [f"bytes={len(CONTENT)}-", "bytes=999999-1000000", "bytes=-0"]:
        response = client.get(path, headers={"Range": header}, status=416)
        assert response.content_type == "application/json"
        assert response.json["code"] == "range_not_satisfiable"
        assert response.headers["Content-Range"] == f"bytes */{len(CONTENT)}"
    assert logs(dbsession) == []


def test_if_range_honours_only_the_current_validator(app, customer_app, purchase):
    path = signed_path(customer_app, purchase)
    client = new_client(app)
    full = client.get(path)
    etag, last_modified = full.headers["ETag"], full.headers["Last-Modified"]
    cases = [
        (etag, 206),
        ('"0000"', 200),
        (f"W/{etag}", 200),
        (last_modified, 206),
        ("Mon, 01 Jan 2001 00:00:00 GMT", 200),
        ("garbage", 200),
    ]
    for if_range, status in cases:
        response = client.get(path, headers={"Range": "bytes=10-19", "If-Range": if_range})
        assert response.status_int == status, if_range
        assert response.body == (CONTENT[10:20] if status == 206 else CONTENT)


# --- refusals ----------------------------------------------------------------------------


def test_every_one_character_change_of_a_token_is_refused(app, customer_app, purchase):
    path = signed_path(customer_app, purchase)
    prefix, token = path.rsplit("/", 1)
    client = new_client(app)
    for index, char in enumerate(token):
        if char == ".":
            continue
        replacement = B64[(B64.index(char) + 1) % len(B64)]
        changed = token[:index] + replacement + token[index + 1 :]
        response = client.get(f"{prefix}/{changed}", status=403)
        assert response.json["code"] == "invalid_download_token", index
    # Including the spare bits of the last signature character: same bytes, other text.
    last = token[-1]
    sibling = B64[B64.index(last) ^ 1]
    response = client.get(f"{prefix}/{token[:-1]}{sibling}", status=403)
    assert response.json["code"] == "invalid_download_token"
    client.get(path, status=200)


def test_malformed_tokens_are_403_json(testapp):
    for token in [
        "abc",
        "a.b",
        "..",
        ".",
        "A" * 500,
        "%C3%BC.%C3%BC",
        "AAAA.AAAA",
        "AQ.AQ",
        "x" * 55 + "." + "y" * 43,
    ]:
        response = testapp.get(f"/api/downloads/{token}", status=403)
        assert response.content_type == "application/json"
        assert response.json["code"] == "invalid_download_token", token
    # Control characters never reach the route: the edge refuses them in every path.
    response = testapp.get("/api/downloads/%00.%00", status=400)
    assert response.json["code"] == "malformed_request"


def test_expired_token_is_410(app, purchase):
    signer = download_signer(app)
    token, claims = signer.sign(
        purchase.entitlement.id, purchase.release.id, now=time.time() - 3600
    )
    assert claims.expires < time.time()
    response = new_client(app).get(f"/api/downloads/{token}", status=410)
    assert response.json["code"] == "download_link_expired"


def test_token_signed_with_another_secret_is_403(app, purchase):
    stranger = DownloadTokenSigner("another-secret-0123456789-abcdefghijklmnop", 600)
    token, _ = stranger.sign(purchase.entitlement.id, purchase.release.id)
    response = new_client(app).get(f"/api/downloads/{token}", status=403)
    assert response.json["code"] == "invalid_download_token"


def test_signing_key_is_derived_not_the_raw_secret(purchase):
    signer = DownloadTokenSigner(TEST_SECRET, 600)
    token, _ = signer.sign(purchase.entitlement.id, purchase.release.id)
    payload, signature = token.split(".")
    raw = hmac.new(TEST_SECRET.encode(), payload.encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != signature
    assert signer.verify(token).entitlement_id == purchase.entitlement.id


def test_revoked_or_held_entitlement_refuses_an_issued_url(app, customer_app, purchase, dbsession):
    path = signed_path(customer_app, purchase)
    client = new_client(app)
    set_entitlement_status(dbsession, purchase, "revoked")
    assert client.get(path, status=410).json["code"] == "download_revoked"
    set_entitlement_status(dbsession, purchase, "on_hold")
    assert client.get(path, status=403).json["code"] == "download_on_hold"
    set_entitlement_status(dbsession, purchase, "active")
    assert client.get(path).body == CONTENT
    assert len(logs(dbsession)) == 1


def test_token_naming_another_products_file_is_404(app, dbsession, customer, purchase, storage_dir):
    other = make_purchase(dbsession, customer, storage_dir, content=b"other product")
    signer = download_signer(app)
    client = new_client(app)
    for entitlement_id, release_id in (
        (purchase.entitlement.id, other.release.id),
        (987654, purchase.release.id),
        (purchase.entitlement.id, 987654),
        (2**63, 2**63),
    ):
        token, _ = signer.sign(entitlement_id, release_id)
        response = client.get(f"/api/downloads/{token}", status=404)
        assert response.json["code"] == "download_not_found"


def test_missing_file_is_a_recorded_500(app, customer_app, purchase, storage_dir, dbsession):
    path = signed_path(customer_app, purchase)
    os.remove(os.path.join(str(storage_dir), purchase.release.storage_path))
    response = new_client(app).get(path, status=500)
    assert response.json["code"] == "download_file_missing"
    dbsession.commit()
    record = dbsession.scalar(
        select(ErrorRecord).where(ErrorRecord.support_code == response.json["supportCode"])
    )
    assert record is not None and record.error_code == "download_file_missing"


def test_storage_path_cannot_leave_the_storage_dir(
    app, customer_app, purchase, dbsession, tmp_path
):
    secret_file = tmp_path / "secret.txt"
    secret_file.write_bytes(b"not for download")
    release = dbsession.get(Release, purchase.release.id)
    for storage_path in ("../secret.txt", str(secret_file), "releases/../../secret.txt"):
        release.storage_path = storage_path
        dbsession.commit()
        path = signed_path(customer_app, purchase)
        response = new_client(app).get(path, status=500)
        assert response.json["code"] == "download_file_missing"
        assert b"not for download" not in response.body


def test_file_names_are_safe_in_content_disposition(
    app, customer_app, dbsession, customer, storage_dir
):
    purchase = make_purchase(
        dbsession, customer, storage_dir, content=b"x", file_name='Ünïcode "quoted";\r\n.zip'
    )
    header = new_client(app).get(signed_path(customer_app, purchase)).headers["Content-Disposition"]
    assert header.startswith('attachment; filename="')
    assert "\r" not in header and "\n" not in header
    fallback = header.split('filename="')[1].split('"')[0]
    assert fallback.isascii() and '"' not in fallback and ";" not in fallback
    encoded = header.split("filename*=UTF-8''")[1]
    assert unquote(encoded) == "Ünïcode _quoted_;__.zip"


# --- X-Accel-Redirect --------------------------------------------------------------------


def test_x_accel_redirect_mode_hands_the_file_to_nginx(make_app, customer, purchase, dbsession):
    app = make_app(
        **{
            "cmsshop.download_delivery": "x-accel-redirect",
            "cmsshop.download_accel_prefix": "protected-files",
        }
    )
    client = new_client(app)
    client.login(customer.email)
    path = signed_path(client, purchase)
    response = new_client(app).get(path, headers={"Range": "bytes=5-9"})
    assert response.status_int == 200
    assert response.body == b""
    assert response.headers["X-Accel-Redirect"] == (
        f"/protected-files/{purchase.release.storage_path}"
    )
    assert response.headers["Content-Disposition"].startswith("attachment;")
    assert response.headers["ETag"] == f'"{purchase.release.sha256}"'
    [entry] = logs(dbsession)
    assert (entry.delivery, entry.status, entry.content_length) == ("x-accel-redirect", 200, 0)
    assert (entry.range_start, entry.range_end) == (5, 9)


def test_signer_and_delivery_are_services_chosen_by_settings(app, make_app):
    """Views find both backends with request.find_service; no registry keys remain."""

    def service(of_app, iface):
        env = prepare(registry=of_app.registry)
        try:
            return env["request"].find_service(iface)
        finally:
            env["closer"]()

    accel = make_app(**{"cmsshop.download_delivery": "x-accel-redirect"})
    assert isinstance(service(app, IFileDelivery), StreamDelivery)
    assert isinstance(service(accel, IFileDelivery), AccelRedirectDelivery)
    assert service(app, DownloadTokenSigner) is download_signer(app)
    assert service(app, DownloadTokenSigner) is not service(accel, DownloadTokenSigner)
    assert "cmsshop.download_signer" not in app.registry


# --- a real multi-megabyte file over HTTP ------------------------------------------------


def test_large_file_range_and_resumed_download_over_http(
    app, customer_app, dbsession, customer, storage_dir
):
    content = os.urandom(5 * 1024 * 1024 + 123)
    digest = hashlib.sha256(content).hexdigest()
    purchase = make_purchase(dbsession, customer, storage_dir, content=content)
    with serve(app) as base_url:
        url = base_url + signed_path(customer_app, purchase)

        # A plain Range request for the first 2 MiB.
        first = requests.get(url, headers={"Range": "bytes=0-2097151"}, timeout=60)
        assert first.status_code == 206
        assert first.headers["Content-Range"] == f"bytes 0-2097151/{len(content)}"
        assert len(first.content) == 2 * 1024 * 1024

        # A transfer that breaks off part-way, then resumes where it stopped.
        received = bytearray()
        with requests.get(url, stream=True, timeout=60) as interrupted:
            assert interrupted.status_code == 200
            assert interrupted.headers["Content-Length"] == str(len(content))
            etag = interrupted.headers["ETag"]
            for chunk in interrupted.iter_content(64 * 1024):
                received += chunk
                if len(received) >= 1_500_000:
                    break
        rest = requests.get(
            url, headers={"Range": f"bytes={len(received)}-", "If-Range": etag}, timeout=60
        )
        assert rest.status_code == 206
        assert rest.headers["Content-Range"] == (
            f"bytes {len(received)}-{len(content) - 1}/{len(content)}"
        )
        assert hashlib.sha256(bytes(received) + rest.content).hexdigest() == digest

        # And the first part plus the rest of a plain range request.
        tail = requests.get(url, headers={"Range": "bytes=2097152-"}, timeout=60)
        assert hashlib.sha256(first.content + tail.content).hexdigest() == digest

        # A download manager: four ranges fetched in parallel, then put together.
        quarter = len(content) // 4 + 1
        parts: dict[int, bytes] = {}

        def fetch(index: int) -> None:
            start = index * quarter
            end = min(start + quarter, len(content)) - 1
            response = requests.get(url, headers={"Range": f"bytes={start}-{end}"}, timeout=60)
            assert response.status_code == 206
            parts[index] = response.content

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assembled = b"".join(parts[i] for i in range(4))
        assert hashlib.sha256(assembled).hexdigest() == digest
    entries = logs(dbsession)
    assert [(e.status, e.range_start) for e in entries[:4]] == [
        (206, 0),
        (200, None),
        (206, len(received)),
        (206, 2097152),
    ]
    assert sorted(e.range_start for e in entries[4:]) == [i * quarter for i in range(4)]


# --- the building blocks -----------------------------------------------------------------


def test_parse_range_rules():
    assert parse_range(None, 100) is None
    assert parse_range("", 100) is None
    assert parse_range("bytes=0-0", 100) == ByteRange(0, 0)
    assert parse_range("bytes=90-200", 100) == ByteRange(90, 99)
    assert parse_range("bytes=-10", 100) == ByteRange(90, 99)
    assert parse_range("bytes=5-1", 100) is None
    assert parse_range("bytes=0-1, 5-6", 100) is None
    for header, size in (("bytes=100-", 100), ("bytes=-0", 100), ("bytes=-1", 0), ("bytes=0-", 0)):
        with pytest.raises(RangeNotSatisfiable):
            parse_range(header, size)


def test_if_range_and_paths_and_names():
    modified = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    http_date = email.utils.format_datetime(modified, usegmt=True)
    assert if_range_matches(None, '"a"', modified)
    assert if_range_matches('"a"', '"a"', modified)
    assert not if_range_matches('"b"', '"a"', modified)
    assert if_range_matches(http_date, '"a"', modified.replace(microsecond=7))
    assert not if_range_matches("Tue, 01 Jan 2030 00:00:00 GMT", '"a"', modified)
    assert safe_relative_path("releases/a/1.zip") == "releases/a/1.zip"
    for bad in ("", "/etc/passwd", "../x", "a/../../x", "..", ".", "a\x00b", "..\\x"):
        assert safe_relative_path(bad) is None, bad
    assert content_disposition("plain-1.0.zip") == 'attachment; filename="plain-1.0.zip"'
    assert content_disposition("") == 'attachment; filename="download"'
    assert "../" not in content_disposition("../../etc/passwd")


def test_stream_delivery_reads_in_bounded_chunks(storage_dir, purchase):
    big = os.urandom(CHUNK_SIZE * 3 + 10)
    with open(os.path.join(str(storage_dir), purchase.release.storage_path), "wb") as handle:
        handle.write(big)
    delivery = StreamDelivery(str(storage_dir)).deliver(purchase.release, "GET", None, None)
    assert isinstance(delivery.response.app_iter, FileRangeIter)
    chunks = list(delivery.response.app_iter)
    assert max(len(c) for c in chunks) <= CHUNK_SIZE and len(chunks) == 4
    assert b"".join(chunks) == big
    assert delivery.response.app_iter.file.closed
    # Closing without iterating (a client that went away) still closes the file.
    unread = StreamDelivery(str(storage_dir)).deliver(purchase.release, "GET", "bytes=1-", None)
    unread.response.app_iter.close()
    assert unread.response.app_iter.file.closed


def test_accel_prefix_is_normalised(purchase):
    for prefix, expected in (("/protected-files/", "/protected-files/"), ("x", "/x/"), ("", "/")):
        header = AccelRedirectDelivery(prefix).deliver(purchase.release, "GET", None, None)
        assert header.response.headers["X-Accel-Redirect"] == expected + "releases/" + (
            f"{purchase.product.slug}/1.0.0.zip"
        )
