"""Tenant business tools over MCP: contracts, the server, and the orchestrator's client side."""
