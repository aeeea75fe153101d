from tests.utils.model_fixtures import gateway, offline_model  # noqa: F401 (fixtures)
from tests.utils.tracing import spans  # noqa: F401 (fixture)
