"""Channel adapters: one package per channel (verify, normalize, store, send)."""
