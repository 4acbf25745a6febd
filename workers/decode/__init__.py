"""Decode loops that turn a model (or a compiled forward) into fixed-length greedy generations: each an `LLMRunner`
returning a `Generation` (both defined in mlcbench.workers.interface)."""
