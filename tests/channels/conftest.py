"""Fixtures every channel's tests share (``tests/utils/channel_fixtures.py``)."""

from tests.utils.channel_fixtures import e2e_settings, model, offline_model, scratch_settings

__all__ = ["e2e_settings", "model", "offline_model", "scratch_settings"]
