"""Reports over the result store: terminal tables, a static HTML report with figures, Markdown tables, comparisons
across GPUs and envs, exports and merges."""
