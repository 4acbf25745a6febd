"""Benchmark models: synthetic matmul/FFN stacks, and Llama LLMs from shipped configs or a checkpoint folder."""
