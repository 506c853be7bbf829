"""OpenAI, Azure and OpenAI-compatible servers: the online chat backend and the Batch API."""
