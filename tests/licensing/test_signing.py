"""The lease signer: local PEM keys (rotation, cache, unreadable keys) and a real remote
HTTP signer on loopback (Vault transit shape), stopped to prove 503-worthy failures."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fakes.vault import VAULT_TOKEN, fake_vault
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


def verify(token: str, jwks: dict) -> dict:
    obj = jws.deserialize_compact(token, KeySet.import_key_set(jwks), registry=lease_registry())
    assert obj.headers()["typ"] == LEASE_TYP and obj.headers()["alg"] == "EdDSA"
    return json.loads(obj.payload)


def kid_of(token: str) -> str:
    header = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]


# --- a fake Vault transit signer on loopback ------------------------------------------------


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
