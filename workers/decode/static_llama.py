"""A compact Llama for compiled decoding (gpt-fast style) over the weights of a Hugging Face model of the Llama family
as configs describe it: Llama 2/3 (RoPE scaling, as HF's rotary module computes its tables; attention and MLP biases),
Mistral (sliding window while the sequence fits in it), Qwen2 (q/k/v biases); grouped-query heads, tied embeddings, a
head_dim apart from hidden/heads. Anything else is Unfit, with its architecture's name: never a wrong number.

The performance tricks, all visible here: q/k/v and gate/up are each one fused GEMM (fewer, larger kernels per
layer; `fuse_projections=False` keeps one GEMM per projection, the ablation's base); the KV cache is a static buffer of
the module (same shapes every step, so one CUDA graph replays every step); attention is written out in plain ops that
Inductor generates itself (cached_attention), with grouped-query heads reading their shared K/V in place (no repeat
of the cache); only the last position goes through the LM head. Given a `row_kernel` (workers/kernels/gemv.py's), a
one-row step runs each projection as one call of it that also does the RMSNorm before, the SiLU*up before, the
residual add after (one_row_projection says what it computes). Given an `attention_kernel`
(workers/kernels/attention.py's), a one-token step runs each layer's RoPE, cache write and attention as one call of
it. Given a `gemm_kernel` (workers/kernels/gemm.py's), a one-token step of several rows runs each projection and the
LM head through it.

Same weights, not a copy: the fused tensors are built once and the HF model's q/k/v and gate/up weights become views
of them (unfused, the HF weights themselves), so both models keep computing with the very same storage and memory is
not doubled."""

from typing import Callable, NamedTuple, Optional, cast

import torch
from torch import nn

from mlcbench.schema.families import STATIC_DECODE_ARCHITECTURES
from mlcbench.workers.interface import Unfit


ARCHITECTURES = STATIC_DECODE_ARCHITECTURES
# RoPE whose tables depend only on the position; "dynamic" and "longrope" change them with the sequence length
STATIC_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def check_fits(hf_model, max_length: int) -> None:
    """Unfit unless this module computes what the HF model computes over sequences of up to max_length positions."""
    architecture, config = type(hf_model).__name__, hf_model.config
    if architecture not in ARCHITECTURES:
        raise Unfit(f"architecture {architecture} is not implemented (the Llama family: {', '.join(ARCHITECTURES)})")
    if config.hidden_act != "silu":
        raise Unfit(f"{architecture}: activation {config.hidden_act!r} is not implemented (silu only)")
    rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if rope not in STATIC_ROPE_TYPES:
        raise Unfit(f"{architecture}: RoPE type {rope!r} is not implemented ({', '.join(STATIC_ROPE_TYPES)})")
    window = sliding_window(config)
    if window is not None and max_length > window:
        raise Unfit(f"{architecture}: sliding-window attention ({window} positions) over {max_length} positions is "
                    f"not implemented")


def sliding_window(config) -> "int | None":
    """The window of the layers that attend through one, or None where every layer attends to all positions."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if window is None or (layer_types is not None and "sliding_attention" not in layer_types):
        return None
    return window


def _fuse(linears: list[nn.Linear]) -> tuple[nn.Parameter, "nn.Parameter | None"]:
    """One weight [sum of outputs, in] (and one bias, where they have biases) for several projections of the same
    input; theirs become views of it."""
    fused = torch.cat([linear.weight.detach() for linear in linears])
    biased = [linear.bias is not None for linear in linears]
    if any(biased) and not all(biased):
        raise Unfit(f"projections with and without bias fused into one ({biased}) are not implemented")
    fused_bias = torch.cat([linear.bias.detach() for linear in linears]) if all(biased) else None
    offset = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight.data = fused[offset:offset + rows]
        if fused_bias is not None:
            linear.bias.data = fused_bias[offset:offset + rows]
        offset += rows
    return nn.Parameter(fused, requires_grad=False), _optional(fused_bias)


def _shared(parameter: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(parameter.detach(), requires_grad=False)


def _optional(parameter: "torch.Tensor | None") -> "nn.Parameter | None":
    return None if parameter is None else _shared(parameter)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # Hugging Face's order of operations: normalize in fp32, round to the model dtype, then scale
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def one_row_projection(x: torch.Tensor, weight: torch.Tensor, norm: Optional[torch.Tensor] = None, eps: float = 0.0,
                       glu: bool = False, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """What a row kernel computes, in the order and dtypes of the unfused model: F.linear of x (with `norm`: of
    rms_norm(x, norm, eps); with `glu`: of SiLU(gate) * up, x being [gate | up]), plus `residual` where given."""
    if glu:
        gate, up = x.chunk(2, dim=-1)
        x = torch.nn.functional.silu(gate) * up
    elif norm is not None:
        x = rms_norm(x, norm, eps)
    y = torch.nn.functional.linear(x, weight)
    return y if residual is None else residual + y


RowKernel = Callable[..., torch.Tensor]  # one_row_projection's signature


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in Hugging Face's half-split layout (x: [batch, tokens, heads, head_dim], cos/sin: [tokens, head_dim])."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def cached_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor, positions: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """RoPE on the new tokens' q and k, both written into the cache at `positions`, and each new query's attention
    over the cache up to its own position, grouped-query heads reading their shared K/V in place (no repeat of the
    cache). q [batch, tokens, heads * head_dim], k and v [batch, tokens, kv_heads * head_dim], cos/sin [tokens,
    head_dim], caches [batch, kv_heads, length, head_dim]; the result [batch, tokens, heads * head_dim]. What an
    attention kernel computes for one token."""
    batch, tokens, _ = q.shape
    kv_heads, head_dim = k_cache.shape[1], k_cache.shape[3]
    heads = q.shape[-1] // head_dim
    q = rotate(q.view(batch, tokens, heads, head_dim), cos, sin)
    k = rotate(k.view(batch, tokens, kv_heads, head_dim), cos, sin)
    v = v.view(batch, tokens, kv_heads, head_dim)
    k_cache.index_copy_(2, positions, k.transpose(1, 2))
    v_cache.index_copy_(2, positions, v.transpose(1, 2))
    # the query heads of one K/V head as rows of one matrix: [batch, kv_heads, group * tokens, head_dim]
    group = heads // kv_heads
    q = q.view(batch, tokens, kv_heads, group, head_dim).permute(0, 2, 3, 1, 4)
    q = q.reshape(batch, kv_heads, group * tokens, head_dim)
    scores = torch.matmul(q, k_cache.transpose(2, 3)).float() * scale
    # a query sees the cache up to its own position; later slots hold stale or no entries
    visible = torch.arange(k_cache.shape[2], device=q.device)[None, :] <= positions.repeat(group)[:, None]
    weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1).to(v.dtype)
    out = torch.matmul(weights, v_cache)  # [batch, kv_heads, group * tokens, head_dim]
    out = out.view(batch, kv_heads, group, tokens, head_dim).permute(0, 3, 1, 2, 4)
    return out.reshape(batch, tokens, heads * head_dim)


AttentionKernel = Callable[..., torch.Tensor]  # cached_attention's signature, for one token
GemmKernel = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # F.linear's, without bias


class Kernels(NamedTuple):
    """What StaticLlama runs in place of its own PyTorch ops (None: its own, which Inductor compiles)."""

    row_kernel: Optional[RowKernel] = None
    attention_kernel: Optional[AttentionKernel] = None
    gemm_kernel: Optional[GemmKernel] = None


class Block(nn.Module):
    def __init__(self, layer, config, fuse_projections: bool = True, row_kernel: Optional[RowKernel] = None,
                 attention_kernel: Optional[AttentionKernel] = None, gemm_kernel: Optional[GemmKernel] = None):
        super().__init__()
        self.row_kernel = row_kernel
        self.attention_kernel = attention_kernel
        self.gemm_kernel = gemm_kernel
        attention, mlp = layer.self_attn, layer.mlp
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.scale = self.head_dim ** -0.5
        self.fused = fuse_projections
        if fuse_projections:
            self.wqkv, self.bqkv = _fuse([attention.q_proj, attention.k_proj, attention.v_proj])
            self.w13, self.b13 = _fuse([mlp.gate_proj, mlp.up_proj])
        else:
            self.wq, self.bq = _shared(attention.q_proj.weight), _optional(attention.q_proj.bias)
            self.wk, self.bk = _shared(attention.k_proj.weight), _optional(attention.k_proj.bias)
            self.wv, self.bv = _shared(attention.v_proj.weight), _optional(attention.v_proj.bias)
            self.w1, self.b1 = _shared(mlp.gate_proj.weight), _optional(mlp.gate_proj.bias)
            self.w3, self.b3 = _shared(mlp.up_proj.weight), _optional(mlp.up_proj.bias)
        self.wo, self.bo = _shared(attention.o_proj.weight), _optional(attention.o_proj.bias)
        self.w2, self.b2 = _shared(mlp.down_proj.weight), _optional(mlp.down_proj.bias)
        self.attention_norm = _shared(layer.input_layernorm.weight)
        self.ffn_norm = _shared(layer.post_attention_layernorm.weight)
        self.k_cache: torch.Tensor
        self.v_cache: torch.Tensor

    def allocate_cache(self, batch: int, length: int) -> None:
        shape = (batch, self.kv_heads, length, self.head_dim)
        weight = self.wo
        for name in ("k_cache", "v_cache"):
            cache = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
            # the cache is updated in place inside the CUDA graph: its address must never change
            torch._dynamo.mark_static_address(cache)
            self.register_buffer(name, cache, persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        if self.row_kernel is not None and x.numel() == x.shape[-1]:
            return self.forward_one_row(x, positions, cos, sin)
        x = x + self.attend(rms_norm(x, self.attention_norm, self.eps), positions, cos, sin)
        gate, up = self.gate_up(rms_norm(x, self.ffn_norm, self.eps))
        return x + self.linear(torch.nn.functional.silu(gate) * up, self.w2, self.b2)

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
        """F.linear, through the GEMM kernel in a one-token step where there is one."""
        if self.gemm_kernel is not None and x.shape[1] == 1 and bias is None:
            return self.gemm_kernel(x, weight)
        return torch.nn.functional.linear(x, weight, bias)

    def forward_one_row(self, x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor,
                        sin: torch.Tensor) -> torch.Tensor:
        """forward() of one row, four row-kernel calls: q/k/v with the attention norm, o with the residual, gate/up
        with the FFN norm, down with SiLU(gate) * up and the residual (fused projections without biases only)."""
        project = self.row_kernel
        assert project is not None
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        qkv = project(x, self.wqkv, norm=self.attention_norm, eps=self.eps)
        q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
        x = project(self.attention(q, k, v, positions, cos, sin), self.wo, residual=x)
        return project(project(x, self.w13, norm=self.ffn_norm, eps=self.eps), self.w2, glu=True, residual=x)

    def gate_up(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.fused:
            return self.linear(x, self.w13, self.b13).chunk(2, dim=-1)
        return self.linear(x, self.w1, self.b1), self.linear(x, self.w3, self.b3)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.fused:
            q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
            return self.linear(x, self.wqkv, self.bqkv).split([q_size, kv_size, kv_size], dim=-1)
        return tuple(self.linear(x, weight, bias)
                     for weight, bias in ((self.wq, self.bq), (self.wk, self.bk), (self.wv, self.bv)))

    def attend(self, x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x)
        out = self.attention(q, k, v, positions, cos, sin)
        return self.linear(out, self.wo, self.bo)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor,
                  sin: torch.Tensor) -> torch.Tensor:
        """Attention of the new tokens' q/k/v projections over the cache (theirs written into it), before wo; a
        one-token step through the attention kernel, where there is one."""
        attend = self.attention_kernel if self.attention_kernel is not None and q.shape[1] == 1 else cached_attention
        return attend(q, k, v, cos, sin, self.k_cache, self.v_cache, positions, self.scale)


class StaticLlama(nn.Module):
    def __init__(self, hf_model, max_length: "int | None" = None, fuse_projections: bool = True,
                 row_kernel: Optional[RowKernel] = None, attention_kernel: Optional[AttentionKernel] = None,
                 gemm_kernel: Optional[GemmKernel] = None):
        """max_length: the most positions a generation will fill (prompt + new tokens); None: the model's maximum.
        fuse_projections: q/k/v and gate/up each one GEMM (False: one GEMM per projection). row_kernel: what one-row
        steps run each projection through, with its norm, activation and residual (needs fused projections without
        biases). attention_kernel: what one-token steps run each layer's attention through (cached_attention's
        math). gemm_kernel: what one-token steps run each bias-free projection and the LM head through (F.linear's
        math), where no row kernel does."""
        super().__init__()
        config = hf_model.config
        check_fits(hf_model, max_length or config.max_position_embeddings)
        if row_kernel is not None and not fuse_projections:
            raise Unfit("a row kernel runs the fused projections; fuse_projections=False asks for them apart")
        if row_kernel is not None and any(isinstance(module, nn.Linear) and module.bias is not None
                                          for module in hf_model.model.layers.modules()):
            raise Unfit(f"{type(hf_model).__name__}: projections with biases through a row kernel are not implemented")
        self.row_kernel = row_kernel
        self.gemm_kernel = gemm_kernel
        # only to build the cos/sin tables, exactly as HF computes them
        self.hf_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] = hf_model.model.rotary_emb
        self.embed = _shared(hf_model.model.embed_tokens.weight)
        self.layers = nn.ModuleList(Block(layer, config, fuse_projections, row_kernel, attention_kernel,
                                          gemm_kernel)
                                    for layer in hf_model.model.layers)
        self.norm = _shared(hf_model.model.norm.weight)
        self.lm_head = _shared(hf_model.lm_head.weight)
        self.eps = config.rms_norm_eps
        self.batch = self.length = 0
        self.cos: torch.Tensor
        self.sin: torch.Tensor

    def allocate_cache(self, batch: int, length: int) -> None:
        """A KV cache for `batch` rows of up to `length` positions (rounded up to a multiple of 8)."""
        length = -(-length // 8) * 8
        if (batch, length) == (self.batch, self.length):
            return
        for layer in cast("list[Block]", self.layers):
            layer.allocate_cache(batch, length)
        positions = torch.arange(length, device=self.embed.device)[None, :]
        cos, sin = self.hf_rotary(self.embed[:1], positions)
        self.register_buffer("cos", cos[0], persistent=False)
        self.register_buffer("sin", sin[0], persistent=False)
        self.batch, self.length = batch, length

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [batch, vocab] of the last position; ids [batch, tokens] sit at `positions` [tokens] of every row."""
        x = torch.nn.functional.embedding(ids, self.embed)
        cos, sin = self.cos[positions], self.sin[positions]
        for layer in self.layers:
            x = layer(x, positions, cos, sin)
        last = x[:, -1]
        if self.row_kernel is not None and last.numel() == last.shape[-1]:
            return self.row_kernel(last, self.lm_head, norm=self.norm, eps=self.eps)
        if self.gemm_kernel is not None and ids.shape[1] == 1:
            return self.gemm_kernel(rms_norm(last, self.norm, self.eps), self.lm_head)
        return torch.nn.functional.linear(rms_norm(last, self.norm, self.eps), self.lm_head)
