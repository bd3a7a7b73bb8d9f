"""The lease signer: Ed25519 compact JWS behind one interface, two backends.

``LocalKeySigner`` signs with PEM keys in a directory (``cmsshop-admin <ini>
gen-signing-key`` adds one; the newest signs, older ones stay in the JWKS until
``retire-signing-key`` moves them aside). ``RemoteSigner`` asks an HTTP signer such as
HashiCorp Vault's transit ``sign`` endpoint for the signature, so the private key never
lives on the app server. Both build the JWS with joserfc; only where the 64 signature
bytes come from differs. Whatever goes wrong raises :class:`SigningUnavailable`, which
the licensing calls turn into 503 ``signing_unavailable`` -- never an unsigned success.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import http.client
import json
import logging
import os
import re
import socket
import ssl
import threading
import time
from abc import ABC, abstractmethod
from typing import Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc import jws
from joserfc.jwa import EdDSAAlgorithm
from joserfc.jwk import OKPKey

log = logging.getLogger(__name__)

ALG = "EdDSA"
LEASE_TYP = "license-lease+jwt"
RETIRED_DIR = "retired"
KEY_SUFFIX = ".pem"


class SigningUnavailable(Exception):
    """The signer cannot sign right now (key unreadable, signer down or too slow)."""


class _EdDSA(EdDSAAlgorithm):
    """joserfc's RFC 8037 EdDSA without its per-call deprecation warning.

    RFC 9864 prefers the new name ``Ed25519`` for the same signature; the lease contract
    says ``alg: EdDSA`` with ``crv: Ed25519`` because that is what libsodium-based
    verifiers (PHP) and most JOSE libraries in the field accept today.
    """

    security_warning = None


def lease_registry(algorithm: EdDSAAlgorithm | None = None) -> jws.JWSRegistry:
    """A JWS registry that knows exactly one algorithm: EdDSA."""
    registry = jws.JWSRegistry(algorithms=[ALG])
    # An instance attribute: JWSRegistry.register would change every registry.
    registry.algorithms = {ALG: algorithm or _EdDSA()}
    return registry


def public_jwk(public_key: Ed25519PublicKey, kid: str | None = None) -> dict:
    """The public JWK of ``public_key`` with ``kid`` (default: its RFC 7638 thumbprint)."""
    key = OKPKey.import_key(public_key)
    data = dict(key.as_dict(private=False))
    data.update({"kid": kid or key.thumbprint(), "alg": ALG, "use": "sig"})
    return data


def key_id(public_key: Ed25519PublicKey) -> str:
    """RFC 7638 thumbprint (SHA-256, base64url) of the public key: the ``kid``."""
    return OKPKey.import_key(public_key).thumbprint()


def _payload(claims: dict[str, Any]) -> bytes:
    return json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()


class LeaseSigner(ABC):
    """Signs lease claims into a compact JWS and publishes the verifying keys."""

    # Signs in this process, in microseconds and without I/O that can stall (a remote
    # signer may take up to its deadline): validate on SQLite then signs inside its one
    # write transaction (services/licensing/validation.py).
    in_process: bool = False

    @abstractmethod
    def sign(self, claims: dict[str, Any]) -> str:
        """The compact JWS of ``claims``; raises SigningUnavailable."""

    @abstractmethod
    def jwks(self) -> dict:
        """``{"keys": [...]}``: every public key a valid lease may be signed with."""

    def check(self) -> None:  # noqa: B027 - optional hook
        """Raise SigningUnavailable when signing would fail for a local reason."""


# --- local keys ----------------------------------------------------------------------------


class _LoadedKey:
    __slots__ = ("name", "jose_key", "kid", "jwk")

    def __init__(self, name: str, private_key: Ed25519PrivateKey):
        self.name = name
        self.kid = key_id(private_key.public_key())
        self.jose_key = OKPKey.import_key(private_key, {"kid": self.kid})
        self.jwk = public_jwk(private_key.public_key(), self.kid)


def _key_files(key_dir: str) -> list[os.DirEntry]:
    try:
        entries = list(os.scandir(key_dir))
    except FileNotFoundError:
        return []
    return sorted(
        (e for e in entries if e.name.endswith(KEY_SUFFIX) and not e.name.startswith(".")),
        key=lambda e: e.name,
        reverse=True,
    )


def _mtime_size(entry: os.DirEntry) -> tuple[int, int]:
    stat = entry.stat()
    return stat.st_mtime_ns, stat.st_size


def load_private_key(path: str) -> Ed25519PrivateKey:
    """Read one PEM file; ValueError if it is not an unencrypted Ed25519 private key."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (TypeError, UnsupportedAlgorithm) as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("not an Ed25519 private key")
    return key


def generate_signing_key(key_dir: str, now: dt.datetime | None = None) -> tuple[str, str]:
    """Write a new Ed25519 key (mode 0600) into ``key_dir``; it becomes the signing key.

    Files are named by creation time so that the newest sorts last. Returns (path, kid).
    """
    os.makedirs(key_dir, mode=0o700, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    kid = key_id(key.public_key())
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    path = os.path.join(key_dir, f"{stamp}-{kid[:12]}{KEY_SUFFIX}")
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return path, kid


def list_signing_keys(key_dir: str) -> list[dict]:
    """The keys in ``key_dir``, newest (signing) first: name, kid or error."""
    result = []
    for index, entry in enumerate(_key_files(key_dir)):
        item: dict[str, Any] = {"file": entry.name, "signing": index == 0}
        try:
            item["kid"] = key_id(load_private_key(entry.path).public_key())
        except (OSError, ValueError) as exc:
            item["error"] = str(exc)
        result.append(item)
    return result


def retire_signing_key(key_dir: str, kid: str) -> str:
    """Move the key ``kid`` (or the file of that name) into ``<key_dir>/retired/``: it
    leaves the JWKS, so leases it signed stop verifying once runtimes refresh their key
    set. Refuses the last key."""
    keys = list_signing_keys(key_dir)
    match = [k for k in keys if kid in (k.get("kid"), k["file"])]
    if not match:
        raise LookupError(f"no key with kid {kid} in {key_dir}")
    if len([k for k in keys if "kid" in k]) <= 1:
        raise ValueError("refusing to retire the only signing key; generate a new one first")
    retired = os.path.join(key_dir, RETIRED_DIR)
    os.makedirs(retired, mode=0o700, exist_ok=True)
    target = os.path.join(retired, match[0]["file"])
    os.replace(os.path.join(key_dir, match[0]["file"]), target)
    return target


class LocalKeySigner(LeaseSigner):
    """Ed25519 PEM keys in a directory; the file name that sorts last signs.

    Keys are parsed once per process and reloaded only when the directory listing or a
    file's mtime/size changes; the directory is looked at most once per
    ``check_interval`` seconds, so a rotation is picked up within a second without a
    restart and validate stays cheap.
    """

    check_interval = 1.0
    in_process = True

    def __init__(self, key_dir: str, autocreate: bool = False, check_interval: float = 1.0):
        self.key_dir = key_dir
        self.autocreate = autocreate
        self.check_interval = check_interval
        self.registry = lease_registry()
        self._lock = threading.Lock()
        self._state: tuple = ()
        self._keys: list[_LoadedKey] = []
        self._jwks: dict = {"keys": []}
        self._checked_at = float("-inf")

    def _load(self) -> list[_LoadedKey]:
        if self._keys and time.monotonic() - self._checked_at < self.check_interval:
            return self._keys
        try:
            files = _key_files(self.key_dir)
            if not files and self.autocreate:
                with self._lock:
                    if not _key_files(self.key_dir):
                        path, kid = generate_signing_key(self.key_dir)
                        log.warning("created a development lease signing key %s (%s)", path, kid)
                files = _key_files(self.key_dir)
            if not files:
                raise SigningUnavailable(f"no signing key in {self.key_dir}")
            state = tuple((e.name, *_mtime_size(e)) for e in files)
        except OSError as exc:
            raise SigningUnavailable(f"cannot list signing keys in {self.key_dir}: {exc}") from exc
        if state == self._state:
            self._checked_at = time.monotonic()
            return self._keys
        with self._lock:
            if state != self._state:
                loaded = []
                for entry in files:
                    try:
                        loaded.append(_LoadedKey(entry.name, load_private_key(entry.path)))
                    except (OSError, ValueError) as exc:
                        log.error("cannot read lease signing key %s: %s", entry.path, exc)
                        raise SigningUnavailable(f"cannot read signing key {entry.name}") from exc
                self._keys = loaded
                self._jwks = {"keys": [k.jwk for k in loaded]}
                self._state = state
        self._checked_at = time.monotonic()
        return self._keys

    def check(self) -> None:
        self._load()

    def sign(self, claims: dict[str, Any]) -> str:
        key = self._load()[0]
        header = {"alg": ALG, "kid": key.kid, "typ": LEASE_TYP}
        return jws.serialize_compact(header, _payload(claims), key.jose_key, registry=self.registry)

    def jwks(self) -> dict:
        self._load()
        return self._jwks


# --- remote signer -------------------------------------------------------------------------

_VAULT_PREFIX = re.compile(r"^vault:v\d+:")


def _b64decode_any(text: str) -> bytes:
    """Standard or URL-safe base64, padded or not."""
    text = text.strip()
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64: {exc}") from None


def load_public_key(value: str) -> Ed25519PublicKey:
    """A PEM file path, PEM text, or base64 of the 32 raw bytes (what Vault shows)."""
    value = value.strip()
    if value.startswith("-----BEGIN"):
        data = value.encode()
    elif os.path.isfile(value):
        with open(value, "rb") as fh:
            data = fh.read()
    else:
        raw = _b64decode_any(value)
        if len(raw) != 32:
            raise ValueError("a raw Ed25519 public key has 32 bytes")
        return Ed25519PublicKey.from_public_bytes(raw)
    key = serialization.load_pem_public_key(data)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


MAX_ANSWER_BYTES = 64 * 1024


def post_with_deadline(
    url: str, body: bytes, headers: dict[str, str], timeout: float, deadline: float
) -> tuple[int, bytes]:
    """POST ``body`` to ``url``; (status, answer) read in full within ``deadline`` seconds.

    ``timeout`` bounds each connect and read. That alone is no deadline: a signer that
    sends a byte now and then (a dying proxy, a hostile middlebox) would keep the call,
    and the client waiting on it, for as long as it likes. So a timer shuts the socket
    down when the deadline passes, which ends whatever read is in progress. Plain
    http.client rather than requests, because this needs the socket itself; no proxies
    from the environment and no redirects, as before. Raises SigningUnavailable.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SigningUnavailable("the remote signer URL must be http(s)://host/path")
    per_read = min(timeout, deadline)
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=per_read, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=per_read)
    expired = threading.Event()
    connected: list[socket.socket] = []  # the response may outlive conn.sock

    def cut_off() -> None:
        expired.set()
        for sock in connected:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline, cut_off)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        connected.append(conn.sock)
        if expired.is_set():  # the deadline passed while connecting: no socket to cut
            raise SigningUnavailable("remote signer too slow")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", target, body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read(MAX_ANSWER_BYTES + 1)
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        reason = "too slow" if expired.is_set() else type(exc).__name__
        raise SigningUnavailable(f"remote signer unreachable: {reason}") from exc
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise SigningUnavailable("remote signer too slow")
    if len(answer) > MAX_ANSWER_BYTES:
        raise SigningUnavailable("remote signer answer too large")
    return status, answer


class _RemoteEdDSA(EdDSAAlgorithm):
    """EdDSA whose signature is produced by the remote signer."""

    security_warning = None

    def __init__(self, remote: RemoteSigner):
        self.remote = remote

    def sign(self, msg: bytes, key: OKPKey) -> bytes:
        return self.remote.remote_signature(msg)


class RemoteSigner(LeaseSigner):
    """Signatures from an HTTP signer: ``POST url {"input": base64(signing input)}`` ->
    ``{"signature": ...}`` or Vault's ``{"data": {"signature": "vault:v1:..."}}``.

    ``public_keys`` are the signer's public keys, the first being the one it signs with
    now; every one is published in the JWKS (older ones until the operator drops them).
    Each signature is verified against the first key before it is used: a signer that
    answers with another key's signature is as unavailable as one that does not answer.
    """

    def __init__(
        self,
        url: str,
        public_keys: list[Ed25519PublicKey],
        *,
        token: str = "",
        token_header: str = "X-Vault-Token",
        kid: str = "",
        key_version: int | None = None,
        timeout: float = 2.0,
        deadline: float = 5.0,
    ):
        if not url or not public_keys:
            raise ValueError("the remote signer needs a URL and at least one public key")
        self.url = url
        self.token = token
        self.token_header = token_header
        self.key_version = key_version
        self.timeout = timeout
        self.deadline = deadline
        self.public_key = public_keys[0]
        self.kid = kid or key_id(public_keys[0])
        keys = [public_jwk(public_keys[0], self.kid)]
        keys += [public_jwk(k) for k in public_keys[1:]]
        self._jwks = {"keys": keys}
        self._jose_key = OKPKey.import_key(public_keys[0], {"kid": self.kid})
        self.registry = lease_registry(_RemoteEdDSA(self))

    def remote_signature(self, signing_input: bytes) -> bytes:
        body: dict[str, Any] = {"input": base64.b64encode(signing_input).decode("ascii")}
        if self.key_version is not None:
            body["key_version"] = self.key_version
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            if self.token_header.lower() == "authorization":
                headers["Authorization"] = f"Bearer {self.token}"
            else:
                headers[self.token_header] = self.token
        status, payload = post_with_deadline(
            self.url, json.dumps(body).encode(), headers, self.timeout, self.deadline
        )
        if status != 200:
            raise SigningUnavailable(f"remote signer answered HTTP {status}")
        try:
            data = json.loads(payload)
            signature = data.get("signature") or (data.get("data") or {}).get("signature")
            raw = _b64decode_any(_VAULT_PREFIX.sub("", signature))
            self.public_key.verify(raw, signing_input)
        except (ValueError, TypeError, AttributeError, InvalidSignature) as exc:
            raise SigningUnavailable("remote signer gave no valid signature") from exc
        return raw

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": ALG, "kid": self.kid, "typ": LEASE_TYP}
        return jws.serialize_compact(
            header, _payload(claims), self._jose_key, registry=self.registry
        )

    def jwks(self) -> dict:
        return self._jwks


def signer_from_settings(settings) -> LeaseSigner:
    """The signer the ini asks for (``cmsshop.license_signer = local | remote``)."""
    kind = settings["cmsshop.license_signer"]
    if kind == "remote":
        return RemoteSigner(
            settings["cmsshop.license_remote_url"],
            [load_public_key(v) for v in settings["cmsshop.license_remote_public_keys"]],
            token=settings["cmsshop.license_remote_token"],
            token_header=settings["cmsshop.license_remote_token_header"],
            kid=settings["cmsshop.license_remote_key_id"],
            key_version=settings["cmsshop.license_remote_key_version"],
            timeout=settings["cmsshop.license_remote_timeout"],
            deadline=settings["cmsshop.license_remote_deadline"],
        )
    autocreate = settings["cmsshop.license_key_autocreate"]
    if autocreate is None:  # "auto": development conveniences stay out of production
        autocreate = settings["cmsshop.environment"] != "production"
    return LocalKeySigner(
        settings["cmsshop.license_key_dir"],
        autocreate=autocreate,
        check_interval=settings["cmsshop.license_key_check_interval"],
    )
