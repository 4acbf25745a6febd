"""The host side: CLI, suites -> job plan, env discovery, image builds, runtimes, result store, reports.

Never imports torch: everything model-related happens in the worker, inside an environment."""
