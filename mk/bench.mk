# The orchestrator's own checks, each a real run on this machine (minutes, not part of `make test`): a sweep killed at
# random moments and resumed, concurrent sweeps into one store, the per-job overhead, wall time against GPU count
# (simulated workers), `results --history` on a large store. `make bench-slurm` needs Slurm and PostgreSQL (.ci/).
BENCH := tests/bench

.PHONY: bench bench-slurm

bench: $(BIN)/mlcbench
	PYTHONPATH=. $(BIN)/python $(BENCH)/kill_sweep.py --kills 5
	$(BIN)/python $(BENCH)/concurrent_sweeps.py --trials 3
	$(BIN)/python $(BENCH)/overhead.py --jobs 10
	PYTHONPATH=. $(BIN)/python $(BENCH)/scale.py --jobs 32
	$(BIN)/python $(BENCH)/history_listing.py --attempts 5000

bench-slurm: $(BIN)/mlcbench
	$(BIN)/python $(BENCH)/slurm_array.py --jobs 100

# Every study's figure checked against its store; benchmarks/README.md and docs/support.md written from the manifests
.PHONY: studies
studies: $(BIN)/mlcbench
	$(BIN)/python tools/studies.py
