"""Offline model server and gateway fixtures for handoff tests."""

from tests.utils.model_fixtures import gateway, offline_model, orchestrator

__all__ = ["gateway", "offline_model", "orchestrator"]
