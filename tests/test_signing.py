"""The lease signer: local PEM keys (rotation, cache, unreadable keys) and a real remote
HTTP signer on loopback (Vault transit shape), stopped to prove 503-worthy failures."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from joserfc import jws
from joserfc.jwk import KeySet

from cmsshop.scripts import admin
from cmsshop.services.licensing.signing import (
    LEASE_TYP,
    LocalKeySigner,
    RemoteSigner,
    SigningUnavailable,
    generate_signing_key,
    key_id,
    lease_registry,
    list_signing_keys,
    load_public_key,
    retire_signing_key,
)

VAULT_TOKEN = "s.test-vault-token"


def verify(token: str, jwks: dict) -> dict:
    obj = jws.deserialize_compact(token, KeySet.import_key_set(jwks), registry=lease_registry())
    assert obj.headers()["typ"] == LEASE_TYP and obj.headers()["alg"] == "EdDSA"
    return json.loads(obj.payload)


def kid_of(token: str) -> str:
    header = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]


# --- a fake Vault transit signer on loopback ------------------------------------------------


class FakeVaultSigner:
    """``POST /v1/transit/sign/leases`` like Vault: base64 input, ``vault:v1:`` signature.

    ``mode``: "vault" (Vault's body), "plain" ({"signature": base64url}), "wrong-key"
    (signs with another key), "slow" (answers after 1 s), "error" (HTTP 500),
    "drip-body" / "drip-headers" (a byte every ``drip_every`` s for ``drip_for`` s),
    "silent" (reads the request, never answers). ``delay`` seconds before answering
    calls whose lease is for one of ``slow_fingerprints`` (all calls when it is None).
    """

    def __init__(self, mode: str = "vault"):
        self.key = Ed25519PrivateKey.generate()
        self.mode = mode
        self.requests: list[dict] = []
        self.delay = 0.0
        self.slow_fingerprints: set[str] | None = None
        self.drip_every, self.drip_for = 0.3, 8.0
        signer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                signer.requests.append({"body": body, "token": self.headers.get("X-Vault-Token")})
                if self.headers.get("X-Vault-Token") != VAULT_TOKEN:
                    return self._send(403, {"errors": ["permission denied"]})
                if signer.mode == "error":
                    return self._send(500, {"errors": ["internal"]})
                if signer.mode == "slow":
                    time.sleep(1)
                if signer.mode in ("drip-body", "drip-headers", "silent"):
                    return self._drip()
                if signer.delay and (
                    signer.slow_fingerprints is None
                    or lease_fingerprint(body["input"]) in signer.slow_fingerprints
                ):
                    time.sleep(signer.delay)
                key = Ed25519PrivateKey.generate() if signer.mode == "wrong-key" else signer.key
                raw = key.sign(base64.b64decode(body["input"]))
                if signer.mode == "plain":
                    return self._send(200, {"signature": base64.urlsafe_b64encode(raw).decode()})
                sig = "vault:v1:" + base64.b64encode(raw).decode()
                return self._send(200, {"data": {"signature": sig, "key_version": 1}})

            def _drip(self):
                """Keep the connection busy without ever finishing the answer."""
                with contextlib.suppress(OSError):
                    if signer.mode == "drip-body":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                    elif signer.mode == "drip-headers":
                        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                    self.wfile.flush()
                    end = time.monotonic() + signer.drip_for
                    while time.monotonic() < end:
                        if signer.mode != "silent":
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        time.sleep(signer.drip_every)

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that timed out and hung up is expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/transit/sign/leases"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def public_key_b64(self) -> str:
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return base64.b64encode(raw).decode()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def lease_fingerprint(signing_input_b64: str) -> str:
    """The ``fp`` claim of the lease whose JWS signing input was sent for signing."""
    payload = base64.b64decode(signing_input_b64).split(b".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))["fp"]


@contextlib.contextmanager
def fake_vault(mode: str = "vault"):
    signer = FakeVaultSigner(mode)
    try:
        yield signer
    finally:
        with contextlib.suppress(Exception):
            signer.stop()


def remote_settings(vault: FakeVaultSigner, **extra) -> dict:
    return {
        "cmsshop.license_signer": "remote",
        "cmsshop.license_remote_url": vault.url,
        "cmsshop.license_remote_token": VAULT_TOKEN,
        "cmsshop.license_remote_public_keys": vault.public_key_b64,
        "cmsshop.license_remote_timeout": "0.5",
        **extra,
    }


# --- local keys -----------------------------------------------------------------------------


def test_autocreate_makes_one_private_key_file(tmp_path):
    key_dir = tmp_path / "keys"
    signer = LocalKeySigner(str(key_dir), autocreate=True)
    token = signer.sign({"hello": "world"})
    files = os.listdir(key_dir)
    assert len(files) == 1 and files[0].endswith(".pem")
    assert os.stat(key_dir / files[0]).st_mode & 0o077 == 0  # private to the owner
    assert verify(token, signer.jwks()) == {"hello": "world"}
    jwk = signer.jwks()["keys"][0]
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519" and jwk["alg"] == "EdDSA"
    assert "d" not in jwk  # never the private part
    assert kid_of(token) == jwk["kid"]


def test_kid_is_the_rfc7638_thumbprint(tmp_path):
    path, kid = generate_signing_key(str(tmp_path))
    with open(path, "rb") as fh:
        private = serialization.load_pem_private_key(fh.read(), password=None)
    raw = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    x = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"))
    import hashlib

    expected = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest())
    assert kid == expected.rstrip(b"=").decode() == key_id(private.public_key())


def test_key_directory_is_looked_at_once_a_second_at_most(tmp_path):
    signer = LocalKeySigner(str(tmp_path), autocreate=True)  # check_interval 1 s
    kid = kid_of(signer.sign({"a": 1}))
    generate_signing_key(str(tmp_path))
    assert kid_of(signer.sign({"a": 1})) == kid  # cached: no directory scan per lease
    signer.check_interval = 0
    assert kid_of(signer.sign({"a": 1})) != kid


def test_no_key_and_no_autocreate_is_unavailable(tmp_path):
    signer = LocalKeySigner(str(tmp_path / "missing"), autocreate=False)
    with pytest.raises(SigningUnavailable):
        signer.sign({"a": 1})
    with pytest.raises(SigningUnavailable):
        signer.jwks()
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"not a pem file",
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        None,  # an RSA key: readable, but not Ed25519
    ],
)
def test_unreadable_key_is_unavailable(tmp_path, content):
    if content is None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        content = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    (tmp_path / "20990101T000000Z-bad.pem").write_bytes(content)
    signer = LocalKeySigner(str(tmp_path), autocreate=True)
    with pytest.raises(SigningUnavailable):
        signer.sign({"a": 1})
    assert len(os.listdir(tmp_path)) == 1  # autocreate never papers over a broken key


def test_key_that_becomes_unreadable_is_noticed(tmp_path):
    signer = LocalKeySigner(str(tmp_path), autocreate=True, check_interval=0)
    signer.sign({"a": 1})
    (name,) = os.listdir(tmp_path)
    (tmp_path / name).write_bytes(b"garbage")  # same name, new size and mtime
    with pytest.raises(SigningUnavailable):
        signer.sign({"a": 1})


def test_rotation_newest_signs_older_stay_until_retired(tmp_path):
    key_dir = str(tmp_path)
    signer = LocalKeySigner(key_dir, check_interval=0)
    _, old_kid = generate_signing_key(key_dir)
    old_token = signer.sign({"n": 1})
    assert kid_of(old_token) == old_kid

    time.sleep(0.01)
    _, new_kid = generate_signing_key(key_dir)
    new_token = signer.sign({"n": 2})  # picked up without a restart
    assert kid_of(new_token) == new_kid
    jwks = signer.jwks()
    assert [k["kid"] for k in jwks["keys"]] == [new_kid, old_kid]
    assert verify(old_token, jwks) == {"n": 1}  # leases of the old key still verify

    listed = list_signing_keys(key_dir)
    assert [(k["kid"], k["signing"]) for k in listed] == [(new_kid, True), (old_kid, False)]

    retire_signing_key(key_dir, old_kid)
    assert [k["kid"] for k in signer.jwks()["keys"]] == [new_kid]
    assert os.listdir(os.path.join(key_dir, "retired"))
    with pytest.raises(ValueError):
        retire_signing_key(key_dir, new_kid)  # never the last key
    with pytest.raises(LookupError):
        retire_signing_key(key_dir, "no-such-kid")


def test_gen_signing_key_command(tmp_path, capsys, database_url):
    key_dir = tmp_path / "keys"
    ini = tmp_path / "site.ini"
    ini.write_text(
        "[app:main]\nuse = egg:cmsshop\n"
        f"cmsshop.database_url = {database_url}\n"
        f"cmsshop.license_key_dir = {key_dir}\n"
    )
    assert admin.main([str(ini), "gen-signing-key"]) == 0
    out = capsys.readouterr().out
    (name,) = os.listdir(key_dir)
    kid = out.split("kid ")[1].split()[0]
    assert name in out
    assert admin.main([str(ini), "gen-signing-key"]) == 0
    assert admin.main([str(ini), "list-signing-keys"]) == 0
    listed = json.loads(capsys.readouterr().out.split("\n", 3)[-1])
    assert listed[1]["kid"] == kid and listed[1]["signing"] is False
    assert admin.main([str(ini), "retire-signing-key", "--", kid]) == 0
    assert admin.main([str(ini), "retire-signing-key", "--", kid]) == 1


# --- remote signer --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["vault", "plain"])
def test_remote_signer_signs_through_http(mode):
    with fake_vault(mode) as vault:
        signer = RemoteSigner(
            vault.url, [load_public_key(vault.public_key_b64)], token=VAULT_TOKEN, timeout=2
        )
        token = signer.sign({"aud": "x"})
        assert verify(token, signer.jwks()) == {"aud": "x"}
        assert kid_of(token) == key_id(vault.key.public_key())
        assert vault.requests[0]["token"] == VAULT_TOKEN
        signing_input = token.rsplit(".", 1)[0].encode()
        assert base64.b64decode(vault.requests[0]["body"]["input"]) == signing_input


def test_remote_signer_publishes_older_keys_and_accepts_pem(tmp_path):
    older = Ed25519PrivateKey.generate().public_key()
    pem = older.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "old.pem").write_bytes(pem)
    with fake_vault() as vault:
        signer = RemoteSigner(
            vault.url,
            [load_public_key(vault.public_key_b64), load_public_key(str(tmp_path / "old.pem"))],
            token=VAULT_TOKEN,
            kid="vault-leases-v1",
            key_version=1,
        )
        token = signer.sign({"a": 1})
        assert kid_of(token) == "vault-leases-v1"
        assert [k["kid"] for k in signer.jwks()["keys"]] == ["vault-leases-v1", key_id(older)]
        assert vault.requests[0]["body"]["key_version"] == 1


@pytest.mark.parametrize("mode", ["wrong-key", "slow", "error"])
def test_remote_signer_failures_are_unavailable(mode):
    with fake_vault(mode) as vault:
        signer = RemoteSigner(
            vault.url, [load_public_key(vault.public_key_b64)], token=VAULT_TOKEN, timeout=0.3
        )
        with pytest.raises(SigningUnavailable):
            signer.sign({"a": 1})


def test_remote_signer_wrong_token_and_stopped_server_are_unavailable():
    with fake_vault() as vault:
        public = [load_public_key(vault.public_key_b64)]
        with pytest.raises(SigningUnavailable):
            RemoteSigner(vault.url, public, token="wrong", timeout=1).sign({"a": 1})
        signer = RemoteSigner(vault.url, public, token=VAULT_TOKEN, timeout=1)
        signer.sign({"a": 1})
        vault.stop()
        with pytest.raises(SigningUnavailable):
            signer.sign({"a": 1})
