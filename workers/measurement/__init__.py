"""Measurement, the same for every workflow: timers, LLM and synthetic jobs, correctness, compile statistics, and the
probes of where a job ran (GPU, host CPU, packages)."""
