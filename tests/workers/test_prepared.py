"""A workflow returns what it did (a Prepared, with its stack helpers' Fragments folded in); its context holds only
inputs."""

import dataclasses
from pathlib import Path

import pytest
import torch

from mlcbench.schema import Applied, JobSpec
from mlcbench.workers.interface import Fragment, Prepared, WorkflowContext, with_fields
from mlcbench.workers.workflows.eager import Eager
from mlcbench.workers.workflows.torch_compile import TorchCompile


def test_the_context_holds_the_inputs_only_and_cannot_be_written(tmp_path):
    assert [field.name for field in dataclasses.fields(WorkflowContext)] == ["job", "device", "dtype", "cache_dir"]
    ctx = WorkflowContext(job=JobSpec(model="ffn-small", workflow="eager", precision="fp32", batch_size=1,
                                      device="cpu"), device=torch.device("cpu"), dtype=torch.float32,
                          cache_dir=tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.cache_dir = Path("/elsewhere")


def test_fragments_fold_in_order_and_leave_unset_fields_unset():
    notes = {"compiled": "model.forward"}
    prepared = Prepared(print, Applied(backend="inductor", dynamic_shapes=True), notes=notes)
    folded = prepared.fold(Fragment(Applied(export="onnx", dynamic_shapes=False), {"onnx_export_cached": True}),
                           Fragment(notes={"onnx_export_cached": False}))
    assert folded is prepared and folded.runner is print
    assert folded.applied == Applied(backend="inductor", export="onnx", dynamic_shapes=False)
    assert folded.applied.model_fields_set == {"backend", "export", "dynamic_shapes"}
    # the same dict: a runner handed it at construction keeps writing where the result reads
    assert folded.notes is notes and notes == {"compiled": "model.forward", "onnx_export_cached": False}


def test_a_field_applied_does_not_have_is_an_error():
    with pytest.raises(ValueError, match="no_such_field"):
        with_fields(Applied(backend="inductor"), no_such_field=1)
    assert with_fields(Applied(backend="inductor"), compiled_graphs=0).model_fields_set == {"backend",
                                                                                          "compiled_graphs"}


def test_workflows_return_their_runner_with_what_they_applied(tmp_path):
    module = torch.nn.Linear(2, 2)
    job = JobSpec(model="ffn-small", workflow="torch_compile", precision="fp32", batch_size=1, device="cpu",
                  options={"compile_mode": "max-autotune"})
    ctx = WorkflowContext(job=job, device=torch.device("cpu"), dtype=torch.float32, cache_dir=tmp_path)
    eager = Eager().compile_module(module, (torch.ones(1, 2),), ctx)
    assert eager.runner is module and eager.applied == Applied() and eager.sync is None and eager.notes == {}
    compiled = TorchCompile().compile_module(module, (torch.ones(1, 2),), ctx)  # compiles at its first call only
    assert compiled.applied == Applied(backend="inductor", compile_mode="max-autotune", dynamic_shapes=False)
