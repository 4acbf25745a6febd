"""Measurement, the same for every workflow: timers, LLM and synthetic jobs, correctness, compile statistics."""
