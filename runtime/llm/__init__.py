"""Model adapters: the deterministic offline model and any OpenAI-compatible endpoint."""
