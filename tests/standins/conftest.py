"""The offline model server fixture."""

from tests.utils.model_fixtures import offline_model

__all__ = ["offline_model"]
