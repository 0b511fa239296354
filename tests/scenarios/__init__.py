"""Golden-transcript scenarios: the agent loop replayed against recorded data (see _harness)."""
