"""Secrets kept at rest: Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under
a key derived by HKDF-SHA256 from ``cmsshop.secret``, one key per purpose (payment
provider settings, webhook signing secrets), so a value encrypted for one purpose never
decrypts as another. Changing the server secret makes every stored value unreadable
(``InvalidToken``); each caller says what happens then."""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["InvalidToken", "decrypt_value", "encrypt_value"]


@functools.lru_cache(maxsize=16)
def _fernet(server_secret: str, purpose: bytes) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=purpose, info=b"fernet key v1").derive(
        server_secret.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def encrypt_value(server_secret: str, value: Any, purpose: bytes) -> str:
    """``value`` (anything JSON holds) encrypted under the key of ``purpose``."""
    return _fernet(server_secret, purpose).encrypt(json.dumps(value).encode()).decode()


def decrypt_value(server_secret: str, token: str, purpose: bytes) -> Any:
    """Raise InvalidToken when ``token`` was made under another server secret or purpose."""
    return json.loads(_fernet(server_secret, purpose).decrypt(token.encode()))
