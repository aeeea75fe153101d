"""Fixtures every channel's tests share (``tests/utils/channel_fixtures.py``)."""

from typing import Any

import pytest

from tests.utils.channel_fixtures import e2e_settings, model, offline_model, scratch_settings
from tests.utils.web import WebStreams

__all__ = ["e2e_settings", "model", "offline_model", "scratch_settings", "web_streams"]


@pytest.fixture(scope="session")
def web_streams(database_url: str) -> tuple[str, Any]:
    """The website chat's "provider": ``(unused URL, WebStreams)`` reading what the visitors' streams got."""
    return "", WebStreams(database_url)
