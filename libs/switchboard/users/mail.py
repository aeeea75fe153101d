"""Invitation e-mails, sent through the SMTP server of the settings (``SMTP_*``).

The standard library's :mod:`smtplib` runs in a worker thread (one connection per mail, STARTTLS
unless turned off, a login when a user name is set), so the event loop never waits on the mail server.
Without ``SMTP_HOST`` nothing is sent: the console shows the link to copy instead.
"""

from __future__ import annotations

import asyncio
import smtplib
import socket
from datetime import datetime
from email.message import EmailMessage
from email.utils import formataddr, make_msgid

from switchboard.errors import SwitchboardError
from switchboard.i18n import N_, gettext
from switchboard.observability import get_logger
from switchboard.settings import SmtpSettings

__all__ = ["MailNotSent", "invite_message", "send_mail"]

log = get_logger(__name__)

INVITE_SUBJECT = N_("You are invited to %(tenant)s on Switchboard")
INVITE_BODY = N_(
    "Hello,\n\n"
    "%(inviter)s invites you to answer customers of %(tenant)s on Switchboard.\n\n"
    "Open this link to choose your password (it works once, until %(expires)s UTC):\n\n"
    "%(link)s\n\n"
    "If you did not expect this invitation, ignore this e-mail.\n"
)


class MailNotSent(SwitchboardError):
    """The mail server refused the mail or could not be reached; the message says which, in words."""


def _sender(smtp: SmtpSettings) -> str:
    if smtp.smtp_from:
        return smtp.smtp_from
    if smtp.smtp_username and "@" in smtp.smtp_username:
        return smtp.smtp_username
    return f"switchboard@{socket.getfqdn()}"


def invite_message(
    smtp: SmtpSettings,
    *,
    language: str,
    to: str,
    tenant_name: str,
    inviter: str,
    link: str,
    expires_at: datetime,
) -> EmailMessage:
    """The invitation e-mail (plain text, in ``language``) to ``to``."""
    message = EmailMessage()
    message["From"] = _sender(smtp)
    message["To"] = formataddr(("", to))
    message["Subject"] = gettext(language, INVITE_SUBJECT) % {"tenant": tenant_name}
    message["Message-ID"] = make_msgid(domain=(smtp.smtp_host or "localhost"))
    message.set_content(
        gettext(language, INVITE_BODY)
        % {
            "inviter": inviter,
            "tenant": tenant_name,
            "link": link,
            "expires": expires_at.strftime("%Y-%m-%d %H:%M"),
        }
    )
    return message


def _send_blocking(smtp: SmtpSettings, message: EmailMessage) -> None:
    assert smtp.smtp_host
    with smtplib.SMTP(smtp.smtp_host, smtp.smtp_port, timeout=smtp.smtp_timeout_s) as client:
        client.ehlo()
        if smtp.smtp_starttls:
            client.starttls()
            client.ehlo()
        if smtp.smtp_username:
            password = smtp.smtp_password.get_secret_value() if smtp.smtp_password else ""
            client.login(smtp.smtp_username, password)
        client.send_message(message)


async def send_mail(smtp: SmtpSettings, message: EmailMessage) -> None:
    """Send ``message`` through the SMTP server of ``smtp`` (its ``smtp_host`` must be set).

    Raises:
        MailNotSent: the server could not be reached in ``smtp_timeout_s`` seconds, refused the login
            or the mail, or does not offer STARTTLS while ``smtp_starttls`` is on.
    """
    where = f"{smtp.smtp_host}:{smtp.smtp_port}"
    try:
        await asyncio.to_thread(_send_blocking, smtp, message)
    except smtplib.SMTPAuthenticationError:
        log.warning("mail_not_sent", server=where, reason="login refused")
        raise MailNotSent(
            f"the mail server {where} refused the login (SMTP_USERNAME / SMTP_PASSWORD)"
        ) from None
    except smtplib.SMTPNotSupportedError:
        log.warning("mail_not_sent", server=where, reason="no starttls")
        raise MailNotSent(f"the mail server {where} offers no STARTTLS (see SMTP_STARTTLS)") from None
    except smtplib.SMTPException as exc:
        log.warning("mail_not_sent", server=where, reason=type(exc).__name__)
        raise MailNotSent(f"the mail server {where} refused the mail: {exc}") from None
    except OSError as exc:
        log.warning("mail_not_sent", server=where, reason=type(exc).__name__)
        raise MailNotSent(f"could not connect to the mail server {where}: {exc.strerror or exc}") from None
    log.info("mail_sent", server=where)
