"""Credentials encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256, ``cryptography``).

The keys come from ``ENCRYPTION_KEY`` or are generated once into ``DATA_DIR/secrets/encryption.key``
(see :meth:`switchboard.settings.Settings.secret`). Either may hold several keys
separated by commas, newest first: the first encrypts, every one decrypts (``MultiFernet``). To
rotate: put a new key in front (``ENCRYPTION_KEY=NEW,OLD``), restart the services, run
``switchboard keys rotate`` (every stored credential re-encrypted with the new key), then drop the
old key. Losing every key that encrypted a value makes it unreadable: back the keys up with the
database.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from switchboard.errors import SwitchboardError

__all__ = ["CredentialCipher", "CredentialDecryptError", "split_keys"]


class CredentialDecryptError(SwitchboardError):
    """A stored credential could not be decrypted: wrong ``ENCRYPTION_KEY`` or corrupted value."""


def split_keys(keys: bytes | str | Sequence[bytes | str]) -> list[bytes]:
    """``b"NEW,OLD"`` (or a list) → ``[b"NEW", b"OLD"]``: blanks and surrounding spaces dropped.

    Fernet keys are urlsafe base64, which never contains a comma.
    """
    if isinstance(keys, bytes):
        keys = keys.decode()
    parts = (
        keys.split(",")
        if isinstance(keys, str)
        else [k.decode() if isinstance(k, bytes) else k for k in keys]
    )
    return [part.strip().encode() for part in parts if part.strip()]


class CredentialCipher:
    """Encrypts JSON-able credentials to a Fernet token string and back.

    Args:
        keys: one Fernet key, or several (comma-separated or a list), newest first: the first
            encrypts, all decrypt.

    Raises:
        ValueError: no key, or a value that is not a Fernet key.
    """

    def __init__(self, keys: bytes | str | Sequence[bytes | str]) -> None:
        ring = split_keys(keys)
        if not ring:
            raise ValueError("no encryption key")
        self._fernet = MultiFernet([Fernet(key) for key in ring])
        self.key_count = len(ring)
        """How many keys can decrypt (the first also encrypts)."""

    @classmethod
    def from_settings(cls, settings: Any) -> CredentialCipher:
        """The process cipher: ``ENCRYPTION_KEY`` of ``settings`` (a :class:`~switchboard.settings.Settings`)."""
        return cls(settings.secret("encryption_key").encode())

    def encrypt(self, credentials: dict[str, Any]) -> str:
        """``{"access_token": ...}`` → urlsafe base64 token (str), with the first key."""
        return self._fernet.encrypt(json.dumps(credentials, sort_keys=True).encode()).decode()

    def decrypt(self, token: str) -> dict[str, Any]:
        """Inverse of :meth:`encrypt`, with whichever key encrypted it.

        Raises:
            CredentialDecryptError: no key fits, or a tampered token.
        """
        try:
            return json.loads(self._fernet.decrypt(token.encode()))
        except InvalidToken as exc:
            raise CredentialDecryptError(
                "cannot decrypt credentials: wrong ENCRYPTION_KEY or corrupted value"
            ) from exc

    def rotate(self, token: str) -> str:
        """The same credentials encrypted with the first key (the token's timestamp is kept).

        Raises:
            CredentialDecryptError: no key fits, or a tampered token.
        """
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken as exc:
            raise CredentialDecryptError(
                "cannot decrypt credentials: wrong ENCRYPTION_KEY or corrupted value"
            ) from exc
