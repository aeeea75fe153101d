"""The LLM layer: the per-tenant LiteLLM Router, trimming, and the offline model (lexical embedding)."""
