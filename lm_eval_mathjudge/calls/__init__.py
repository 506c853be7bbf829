"""Calling outside services: ``retry`` (the one retry policy), ``limits`` (rpm/tpm windows, the adaptive
gate, the learned rate, one set per backend), ``workers`` (the one bounded pool and the one progress bar)
and ``stop`` (the stop every wait of ours ends on)."""
