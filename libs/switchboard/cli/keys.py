"""``switchboard keys rotate``: re-encrypt every stored credential with the newest ``ENCRYPTION_KEY``."""

from __future__ import annotations

from typing import Any

import typer

from switchboard.cli.root import keys_app
from switchboard.cli.runner import command_settings, friendly_errors, run_in_session

__all__ = ["keys_rotate"]


@keys_app.command("rotate")
@friendly_errors
def keys_rotate() -> None:
    """Re-encrypt every stored credential with the first ENCRYPTION_KEY, in one transaction.

    Put the new key first and keep the old ones after it (ENCRYPTION_KEY=NEW,OLD), restart the
    services, run this, then remove the old keys. A credential no key decrypts aborts the whole
    rotation (nothing changes) and names where it is stored.
    """
    from switchboard.crypto import CredentialCipher
    from switchboard.key_rotation import rotate_credentials

    settings = command_settings()
    cipher = CredentialCipher(settings.secret("encryption_key"))

    async def work(session: Any) -> Any:
        return await rotate_credentials(session, cipher)

    report = run_in_session(work, settings=settings)
    typer.echo(
        f"re-encrypted {report.total} credential(s) with the first of {cipher.key_count} key(s): "
        f"{report.channel_accounts} channel account(s), {report.llm_deployment_keys} model provider key(s), "
        f"{report.embedding_keys} embedding key(s), {report.webhook_secrets} webhook secret(s), "
        f"in {len(report.tenants)} tenant(s)"
    )
