"""Anthropic's Messages API: ``messages`` (online calls and the preflight), ``batch`` (Message Batches)."""
