"""Switchboard: a self-hostable, multi-tenant AI customer-support platform.

The shared library. Services in ``services/`` only wire what lives here.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
