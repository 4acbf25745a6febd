"""The paper's synthetic models. Bias-free, so the analytic FLOP count is exact."""

import torch
from torch import nn

from mlcbench.schema import JobSpec, ModelInfo
from mlcbench.workers.models import INPUT_SET_SEED_STEP


class Matmul(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.proj = nn.Linear(hidden, intermediate, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class MatmulReLU(Matmul):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x))


class FFN(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class FFNMultilayer(nn.Module):
    def __init__(self, hidden: int, intermediate: int, depth: int):
        super().__init__()
        self.layers = nn.Sequential(*(FFN(hidden, intermediate) for _ in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def build(info: ModelInfo, job: JobSpec, dtype: torch.dtype, device: torch.device) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model with seeded random weights, and its input: batch x input_len tokens of hidden_size features."""
    torch.manual_seed(job.seed)
    h, i = info.hidden_size, info.intermediate_size
    with torch.device(device):
        if info.architecture == "matmul":
            model: nn.Module = Matmul(h, i)
        elif info.architecture == "matmul_relu":
            model = MatmulReLU(h, i)
        elif info.architecture == "ffn":
            model = FFN(h, i)
        else:
            model = FFNMultilayer(h, i, info.depth)
        # scaled so activations stay O(1) through deep stacks in half precision
        for linear in (m for m in model.modules() if isinstance(m, nn.Linear)):
            nn.init.normal_(linear.weight, std=linear.in_features ** -0.5)
        model = model.to(dtype).eval()
        x = torch.randn(job.batch_size, job.input_len, h, dtype=dtype)
    return model, (x,)


def input_set(info: ModelInfo, job: JobSpec, dtype: torch.dtype, device: torch.device, index: int) -> tuple[torch.Tensor, ...]:
    """Input set `index` (> 0; build()'s inputs are set 0): other seeded values of the same shape and distribution."""
    generator = torch.Generator().manual_seed(job.seed + INPUT_SET_SEED_STEP * index)
    x = torch.randn(job.batch_size, job.input_len, info.hidden_size, generator=generator)
    return (x.to(device, dtype),)


def flops(info: ModelInfo, job: JobSpec) -> float:
    """Multiply-adds x 2 of the matmuls; ReLU's elementwise work is not counted (as in the paper)."""
    tokens = job.batch_size * job.input_len
    per_layer = 2 * tokens * info.hidden_size * info.intermediate_size
    if info.architecture in ("ffn", "ffn_multilayer"):
        per_layer *= 2
    return float(per_layer * info.depth)
