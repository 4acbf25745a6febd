"""Bugs planted in a worker process that a real `mlcbench sweep` starts (tests/workers/test_planted_checks_cli.py puts
this folder on PYTHONPATH): never in the product code, never in eager's reference. MLCBENCH_TEST_PLANTS maps a suite's
model names to the bug its job gets (JSON). Installed when the worker imports its synthetic measurement; an
orchestrator process, which never does, imports nothing of the worker's."""

import importlib.abc
import importlib.util
import json
import os
import sys
import types

PLANTS = json.loads(os.environ.get("MLCBENCH_TEST_PLANTS", "{}"))
TRIGGER = "mlcbench.workers.measurement.synthetic"
current = {"plant": None}  # the bug of the job being prepared


def leaky_relu(model):
    """The workflow's module computes leaky-ReLU (slope 0.01) where the model has ReLU."""
    import torch

    def leaky(tensor):
        return torch.nn.functional.leaky_relu(tensor, 0.01)

    def forward(x):
        if hasattr(model, "up"):
            return model.down(leaky(model.up(x)))
        return leaky(model.proj(x))
    model.forward = forward


def one_row_wrong(runner):
    """Every call's last batch row 10 % too large."""
    def wrong(*inputs):
        output = runner(*inputs).clone()
        output[-1] *= 1.1
        return output
    return wrong


def frozen_counter_nvml():
    """NVML of a GPU whose energy counter stopped updating after the calibration (its period kept at 20 ms)."""
    return types.SimpleNamespace(
        NVML_TEMPERATURE_GPU=0, nvmlInit=lambda: None, nvmlDeviceGetHandleByUUID=lambda uuid: uuid,
        nvmlDeviceGetTotalEnergyConsumption=lambda handle: 123_456_789, nvmlDeviceGetTemperature=lambda handle, sensor: 40,
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: 700_000)


def install():
    from mlcbench.workers.measurement import core, energy
    from mlcbench.workers.measurement.synthetic import Synthetic

    prepare = Synthetic.prepare

    def prepare_planted(self, workflow, ctx):
        plant = current["plant"] = PLANTS.get(ctx.job.model)
        if plant == "leaky_relu":
            leaky_relu(self.model)
        prepared = prepare(self, workflow, ctx)
        if plant == "one_row_wrong":
            prepared.runner = one_row_wrong(prepared.runner)
        return prepared
    Synthetic.prepare = prepare_planted

    meter = core.energy_meter

    def meter_planted(cuda, calls, cache_root):
        if current["plant"] != "frozen_energy_counter":
            return meter(cuda, calls, cache_root)
        sys.modules["pynvml"] = frozen_counter_nvml()
        return energy.EnergyMeter("GPU-planted", calls, 0.02, cache_root=cache_root)
    core.energy_meter = meter_planted


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Installs the plants once TRIGGER (the worker's synthetic measurement) has been imported."""

    def find_spec(self, name, path=None, target=None):
        if name != TRIGGER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        self.loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        install()


sys.meta_path.insert(0, _AfterImport())
