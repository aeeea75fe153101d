"""Offline model server, gateway and orchestrator fixtures."""

from tests.utils.model_fixtures import gateway, offline_model, orchestrator

__all__ = ["gateway", "offline_model", "orchestrator"]
