"""Calling outside services: the one retry policy, the rate limits and adaptive gate, the one
bounded worker pool, and the stop that every wait of ours ends on."""
