"""gmail service: Gmail push notifications (Pub/Sub) and the Gmail API sandbox.

Run: `uvicorn services.gmail.main:create_app --factory` (`switchboard run` does this). Mailbox sync runs
on the background worker (`sync_gmail_mailbox`, `poll_gmail_mailboxes`).
"""

from fastapi import FastAPI
from switchboard.channels.gmail.push import push_router
from switchboard.service_app import create_service_app
from switchboard.settings import Settings, load_settings
from switchboard.standins.gmail import sandbox_router


def create_app(settings: Settings | None = None) -> FastAPI:
    """Assemble the service; tests pass settings, production reads the environment."""
    settings = settings or load_settings()
    routers = [push_router()]
    if settings.gmail_sandbox_enabled and settings.gmail_uses_sandbox:
        routers.append(
            sandbox_router(
                admin_token=settings.secret("admin_token"), state_path=settings.gmail_sandbox_state_path
            )
        )  # only while the channel talks to it (never next to Google's API); its tokens and ids survive restarts
    return create_service_app(
        "gmail",
        settings,
        routers=routers,
        description="Gmail push notifications (Pub/Sub) and the Gmail API sandbox; mailbox sync runs on "
        "the background worker.",
        db_pre_ping=False,  # a round trip per delivery; a stale connection means one 503, retried
        db_pool=(20, 0),  # the same 20 at most, kept: overflow ones were opened and closed per delivery
    )
