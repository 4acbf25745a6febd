"""Benchmark models: synthetic matmul/FFN stacks, and Llama LLMs from shipped configs or a checkpoint folder."""

# an input set's seed is the job's plus this times its index: a prime, so no two sets of nearby seeds share one
INPUT_SET_SEED_STEP = 7919
