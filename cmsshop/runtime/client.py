"""The runtime client: activate / validate / deactivate, lease verification, grace.

Self-contained on purpose (joserfc and the standard library only), so a product can
vendor this one file.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.client import HTTPException
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwa import EdDSAAlgorithm
from joserfc.jwk import KeySet

LEASE_TYP = "license-lease+jwt"
ALG = "EdDSA"
MAX_RESPONSE_BYTES = 64 * 1024


class LicenseClientError(Exception):
    """Base of every error this client raises."""


class LicenseError(LicenseClientError):
    """The service refused the license (a 4xx answer other than 429): stop using it."""

    def __init__(self, status: int, code: str, message: str, body: dict | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body or {}


class TemporaryFailure(LicenseClientError):
    """No usable answer right now: network error, timeout, 5xx, 429 or a non-JSON page."""

    def __init__(self, message: str, status: int | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


class LeaseRejected(LicenseClientError):
    """A lease failed verification (signature, key, type, audience, fingerprint, nonce,
    or time). Never trusted, whatever the rest of the answer says."""


class LicenseUnavailable(LicenseClientError):
    """No valid lease: the service cannot be asked and the last good lease has expired."""


class _EdDSA(EdDSAAlgorithm):
    security_warning = None  # RFC 9864's rename; same signature (see services/signing.py)


def _registry() -> jws.JWSRegistry:
    registry = jws.JWSRegistry(algorithms=[ALG])
    registry.algorithms = {ALG: _EdDSA()}
    return registry


_REGISTRY = _registry()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def fingerprint_hash(fingerprint: str) -> str:
    return hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Lease:
    """A verified lease and its claims."""

    token: str
    claims: dict[str, Any]

    @property
    def expires_at(self) -> int:
        return int(self.claims["exp"])

    @property
    def refresh_after(self) -> int:
        return int(self.claims.get("refresh_after", self.claims["exp"]))

    @property
    def deactivated(self) -> bool:
        return bool(self.claims.get("deactivated"))

    @property
    def domain(self) -> str:
        return self.claims["dom"]

    @property
    def environment(self) -> str:
        return self.claims["env"]

    @property
    def features(self) -> frozenset[str]:
        """The feature flags the license grants (``lic.features``), signed like the rest
        of the lease, so a product may switch features on without asking the service."""
        license = self.claims.get("lic")
        names = license.get("features") if isinstance(license, dict) else None
        if not isinstance(names, list):
            return frozenset()
        return frozenset(name for name in names if isinstance(name, str))

    def has_feature(self, name: str) -> bool:
        return name in self.features

    def is_valid(self, now: float) -> bool:
        """Inside its lifetime and not a record of a deactivation."""
        return not self.deactivated and self.claims["nbf"] - 60 <= now < self.expires_at


def load_key_set(pinned: dict | str) -> KeySet:
    """A KeySet from a JWKS dict, JSON text or the path of a JSON file."""
    if isinstance(pinned, str):
        if pinned.lstrip().startswith("{"):
            pinned = json.loads(pinned)
        else:
            with open(pinned, encoding="utf-8") as fh:
                pinned = json.load(fh)
    return KeySet.import_key_set(pinned)


def verify_lease(
    token: str,
    key_set: KeySet,
    *,
    product: str,
    fingerprint: str,
    nonce: str | None,
    now: float,
    issuer: str | None = None,
    leeway: int = 60,
) -> Lease:
    """Verify a compact JWS lease against the pinned ``key_set`` and the request it
    answers. ``nonce=None`` skips the nonce check (a lease reloaded from disk)."""
    if not isinstance(token, str) or token.count(".") != 2 or len(token) > 8192:
        raise LeaseRejected("not a compact JWS")
    try:
        obj = jws.deserialize_compact(token, key_set, registry=_REGISTRY)
        claims = json.loads(obj.payload)
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise LeaseRejected(f"bad signature or unknown key: {exc}") from None
    header = obj.headers()
    if header.get("typ") != LEASE_TYP or header.get("alg") != ALG or not header.get("kid"):
        raise LeaseRejected("not a license lease (typ/alg/kid)")
    if not isinstance(claims, dict):
        raise LeaseRejected("claims are not an object")
    required = ("aud", "fp", "nonce", "exp", "nbf", "iat", "dom", "env", "act", "lic")
    missing = [name for name in required if name not in claims]
    if missing:
        raise LeaseRejected(f"missing claims: {', '.join(missing)}")
    if claims["aud"] != product:
        raise LeaseRejected("lease is for another product")
    if claims["fp"] != fingerprint_hash(fingerprint):
        raise LeaseRejected("lease is for another installation")
    if nonce is not None and claims["nonce"] != nonce:
        raise LeaseRejected("lease does not echo our nonce (replayed answer?)")
    if issuer is not None and claims.get("iss") != issuer:
        raise LeaseRejected("lease is from another issuer")
    if not all(isinstance(claims[n], int) for n in ("exp", "nbf", "iat")):
        raise LeaseRejected("time claims must be integers")
    if claims["exp"] <= now:
        raise LeaseRejected("lease has expired")
    if claims["nbf"] > now + leeway:
        raise LeaseRejected("lease is not valid yet")
    return Lease(token, claims)


@dataclasses.dataclass(frozen=True)
class Update:
    """A newer release the license may install (``POST /api/license/update-check``)."""

    version: str
    channel: str
    released_at: str
    changelog_html: str
    requires: dict[str, str | None]
    size: int
    sha256: str
    download_url: str | None
    download_url_expires_at: str | None


class UpdateRejected(LicenseClientError):
    """A downloaded update does not match what the service announced (size or SHA-256),
    or its URL is not one this client downloads from; nothing was kept."""


class LicenseClient:
    """Talks to ``/api/license/*`` and keeps the last good lease.

    ``clock`` (seconds since the epoch) is injectable so a product's tests can move time.
    """

    def __init__(
        self,
        base_url: str,
        *,
        product: str,
        license_key: str,
        domain: str,
        fingerprint: str,
        pinned_keys: dict | str,
        issuer: str | None = None,
        timeout: float = 5.0,
        leeway: int = 60,
        state_path: str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        if not base_url.startswith(("https://", "http://")):
            raise ValueError("base_url must be an http(s) URL")
        self.base_url = base_url.rstrip("/")
        self.product = product
        self.license_key = license_key
        self.domain = domain
        self.fingerprint = fingerprint
        self.key_set = load_key_set(pinned_keys)
        self.issuer = issuer
        self.timeout = timeout
        self.leeway = leeway
        self.state_path = state_path
        self.clock = clock
        self.lease: Lease | None = None
        self.last_error: LicenseClientError | None = None
        # The nonce of the last offline request code, until its lease file is installed.
        self.offline_nonce: str | None = None
        self._load_state()

    # --- calls -------------------------------------------------------------------------

    def activate(self) -> Lease:
        return self._call("activate")

    def validate(self) -> Lease:
        return self._call("validate")

    def deactivate(self) -> Lease:
        """Free this installation's seat; the client holds no usable lease afterwards."""
        return self._call("deactivate")

    def ensure_licensed(self) -> Lease:
        """A valid lease: the current one until its ``refresh_after``, else a fresh one.

        Through network errors, timeouts, 5xx/429 answers and answers whose lease fails
        verification, the last good lease is kept until it expires. A definitive refusal
        (revoked, expired, deactivated...) drops it and raises LicenseError.
        """
        now = self.clock()
        lease = self.lease
        if lease is not None and lease.is_valid(now) and now < lease.refresh_after:
            return lease
        try:
            return self.validate()
        except (TemporaryFailure, LeaseRejected) as exc:
            if lease is not None and lease.is_valid(self.clock()):
                return lease
            raise LicenseUnavailable(f"no valid lease and the service failed: {exc}") from exc

    # --- offline activation ----------------------------------------------------------------

    def offline_request_code(self) -> str:
        """A code for an installation with no network: the customer pastes it into the
        shop's dashboard and brings back a lease file for :meth:`install_offline_lease`.
        Each call makes a new nonce (remembered in the state file), so only the lease
        file of the latest code is accepted."""
        self.offline_nonce = secrets.token_urlsafe(24)
        fields = {
            "v": 1,
            "product": self.product,
            "key": self.license_key,
            "domain": self.domain,
            "fp": self.fingerprint,
            "nonce": self.offline_nonce,
        }
        payload = _b64url(json.dumps(fields, separators=(",", ":")).encode())
        check = _b64url(hashlib.sha256(payload.encode("ascii")).digest()[:6])
        self._save_state()
        return f"CMSOFF1.{payload}.{check}"

    def install_offline_lease(self, lease_file: str | bytes | dict) -> Lease:
        """Verify a lease file from the dashboard offline, against the pinned key set and
        the pending request code (product, fingerprint, nonce, ``offline`` claim, time),
        and keep it: :meth:`ensure_licensed` then works without the network until it
        expires. LeaseRejected for anything else; nothing changes then."""
        try:
            data = lease_file if isinstance(lease_file, dict) else json.loads(lease_file)
            token = data["lease"]
        except (ValueError, TypeError, KeyError):
            raise LeaseRejected("not a lease file") from None
        if self.offline_nonce is None:
            raise LeaseRejected("no offline request code is pending on this installation")
        lease = verify_lease(
            token,
            self.key_set,
            product=self.product,
            fingerprint=self.fingerprint,
            nonce=self.offline_nonce,
            now=self.clock(),
            issuer=self.issuer,
            leeway=self.leeway,
        )
        if lease.claims.get("offline") is not True or lease.deactivated:
            raise LeaseRejected("not an offline activation lease")
        self.lease, self.offline_nonce = lease, None
        self._save_state()
        return lease

    # --- updates -------------------------------------------------------------------------

    def check_for_update(self, current_version: str, channel: str = "stable") -> Update | None:
        """The newest release this license may install if it is newer than
        ``current_version``, else None. Refusals raise LicenseError, outages
        TemporaryFailure (keep running the installed version and ask again later)."""
        payload = {
            "product": self.product,
            "licenseKey": self.license_key,
            "domain": self.domain,
            "fingerprint": self.fingerprint,
            "currentVersion": current_version,
            "channel": channel,
        }
        status, body = self._post("/api/license/update-check", payload)
        if status == 429 or status >= 500 or (status != 200 and not body.get("code")):
            raise TemporaryFailure(f"service answered {status}", status, body.get("retryAfter"))
        if status != 200:
            raise LicenseError(status, str(body.get("code")), str(body.get("message")), body)
        release = body.get("release")
        if body.get("status") != "update_available" or not isinstance(release, dict):
            return None
        try:
            return Update(
                version=str(release["version"]),
                channel=str(release["channel"]),
                released_at=str(release["releasedAt"]),
                changelog_html=str(release.get("changelogHtml") or ""),
                requires=dict(release.get("requires") or {}),
                size=int(release["size"]),
                sha256=str(release["sha256"]).lower(),
                download_url=release.get("downloadUrl"),
                download_url_expires_at=release.get("downloadUrlExpiresAt"),
            )
        except (KeyError, TypeError, ValueError):
            raise TemporaryFailure("the update answer is malformed", status) from None

    def download_update(self, update: Update, path: str) -> str:
        """Download ``update`` to ``path``, keeping it only if its size and SHA-256 are the
        announced ones (UpdateRejected otherwise, and no file is left). The URL must be on
        the service's own origin (so an https service never sends us to plain http)."""
        url = update.download_url
        if not url or urllib.parse.urlsplit(url)[:2] != urllib.parse.urlsplit(self.base_url)[:2]:
            raise UpdateRejected("the download URL is not on the licensing service's origin")
        partial = f"{path}.part"
        digest, received = hashlib.sha256(), 0
        try:
            request = urllib.request.Request(url, method="GET")  # noqa: S310 - origin checked
            with (
                urllib.request.urlopen(request, timeout=self.timeout) as response,  # noqa: S310
                open(partial, "wb") as out,
            ):
                while chunk := response.read(64 * 1024):
                    received += len(chunk)
                    if received > update.size:
                        raise UpdateRejected("the download is larger than announced")
                    digest.update(chunk)
                    out.write(chunk)
            if received != update.size or digest.hexdigest() != update.sha256:
                raise UpdateRejected("the download's size or SHA-256 is not the announced one")
            os.replace(partial, path)
        except (TimeoutError, urllib.error.URLError, OSError, HTTPException) as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise TemporaryFailure(f"download failed: {exc}") from None
        except UpdateRejected:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise
        return path

    # --- internals ---------------------------------------------------------------------

    def _call(self, action: str) -> Lease:
        nonce = secrets.token_urlsafe(24)
        payload = {
            "product": self.product,
            "licenseKey": self.license_key,
            "domain": self.domain,
            "fingerprint": self.fingerprint,
            "nonce": nonce,
        }
        try:
            status, body = self._post(f"/api/license/{action}", payload)
            if status in (200, 201):
                lease = verify_lease(
                    body.get("lease"),
                    self.key_set,
                    product=self.product,
                    fingerprint=self.fingerprint,
                    nonce=nonce,
                    now=self.clock(),
                    issuer=self.issuer,
                    leeway=self.leeway,
                )
                if lease.deactivated != (action == "deactivate"):
                    raise LeaseRejected("lease does not match the call (deactivation flag)")
            elif status == 429 or status >= 500 or not body.get("code"):
                retry_after = body.get("retryAfter") if isinstance(body, dict) else None
                raise TemporaryFailure(f"service answered {status}", status, retry_after)
            else:
                error = LicenseError(status, str(body.get("code")), str(body.get("message")), body)
                self.lease = None
                self._save_state()
                raise error
        except LicenseClientError as exc:
            self.last_error = exc
            raise
        self.last_error = None
        self.lease = lease
        self._save_state()
        return lease

    def _post(self, path: str, payload: dict) -> tuple[int, dict]:
        request = urllib.request.Request(  # noqa: S310 - scheme checked in __init__
            self.base_url + path,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                status, raw = response.status, response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read(MAX_RESPONSE_BYTES + 1)
        except (TimeoutError, urllib.error.URLError, OSError, HTTPException) as exc:
            raise TemporaryFailure(f"service unreachable: {exc}") from None
        try:
            if len(raw) > MAX_RESPONSE_BYTES:
                raise ValueError("answer too large")
            body = json.loads(raw.decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError("answer is not an object")
        except ValueError:
            message = f"service answered {status} without a JSON object"
            raise TemporaryFailure(message, status) from None
        return status, body

    def _load_state(self) -> None:
        if not self.state_path or not os.path.exists(self.state_path):
            return
        try:
            with open(self.state_path, encoding="utf-8") as fh:
                state = json.load(fh)
            nonce = state.get("offlineNonce")
            self.offline_nonce = nonce if isinstance(nonce, str) else None
            token = state["lease"]
            lease = verify_lease(
                token,
                self.key_set,
                product=self.product,
                fingerprint=self.fingerprint,
                nonce=None,  # checked when it was received
                now=self.clock(),
                issuer=self.issuer,
                leeway=self.leeway,
            )
        except (OSError, ValueError, KeyError, TypeError, LeaseRejected):
            return
        self.lease = lease

    def _save_state(self) -> None:
        if not self.state_path:
            return
        temporary = f"{self.state_path}.tmp"
        with open(temporary, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "lease": self.lease.token if self.lease else None,
                    "offlineNonce": self.offline_nonce,
                },
                fh,
            )
        os.replace(temporary, self.state_path)
