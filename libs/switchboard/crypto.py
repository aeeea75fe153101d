"""Credentials encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256, ``cryptography``).

The key comes from ``ENCRYPTION_KEY`` or is generated once into ``DATA_DIR/secrets/encryption.key``
(see :meth:`switchboard.settings.Settings.resolved_encryption_key`). Losing the key makes stored
credentials unreadable: back it up with the database.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from switchboard.errors import SwitchboardError

__all__ = ["CredentialCipher", "CredentialDecryptError"]


class CredentialDecryptError(SwitchboardError):
    """A stored credential could not be decrypted: wrong ``ENCRYPTION_KEY`` or corrupted value."""


class CredentialCipher:
    """Encrypts JSON-able credentials to a Fernet token string and back."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    def encrypt(self, credentials: dict[str, Any]) -> str:
        """``{"access_token": ...}`` → urlsafe base64 token (str)."""
        return self._fernet.encrypt(json.dumps(credentials, sort_keys=True).encode()).decode()

    def decrypt(self, token: str) -> dict[str, Any]:
        """Inverse of :meth:`encrypt`.

        Raises:
            CredentialDecryptError: wrong key or tampered token.
        """
        try:
            return json.loads(self._fernet.decrypt(token.encode()))
        except InvalidToken as exc:
            raise CredentialDecryptError(
                "cannot decrypt credentials: wrong ENCRYPTION_KEY or corrupted value"
            ) from exc
