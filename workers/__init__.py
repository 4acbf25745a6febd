"""The in-environment worker: builds models, applies one workflow, measures, streams results.

`python -m mlcbench.workers run ...` (schema/protocol.py spells the command line) is its only entry point. Heavy libraries (torch and
each workflow's stack) are imported inside the code that needs them, so this package imports anywhere schema does.
"""
