"""OpenAI-compatible chat completions: `/v1/chat/completions` and `/v1/models` (ADR 0038)."""
