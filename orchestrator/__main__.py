from mlcbench.orchestrator.cli import app

app(prog_name="mlcbench")
