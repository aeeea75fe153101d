"""Switchboard: a self-hostable, multi-tenant AI customer-support platform.

The shared library. Services in ``services/`` only wire what lives here.
"""

import os

# LiteLLM fetches its model-cost map from the network at import unless this is set first
# (LiteLLM docs, "Model cost map"). Every process imports this package before litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"

__all__ = ["__version__"]
