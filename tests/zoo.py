"""Small models of the kinds torch.compile users train, each checked against eager.

Every case builds a module and example inputs; :func:`check` compiles it with a
backend (aotgrad's with ``options={"strict": True}``: a graph aotgrad can't compile
is an error, never a silent eager fallback; torch's own backends too, to compare), runs two training steps beside an eager copy and
compares outputs, input mutations, gradients (frozen parameters get none) and
buffers. ``tests/test_model_zoo.py`` runs them all; ``benches/model_sweep.py``
prints a table over backends and static/dynamic shapes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

Case = Callable[[], tuple[nn.Module, tuple[Any, ...]]]
CASES: dict[str, Case] = {}
#: Cases computing in bfloat16: compared with bfloat16's tolerance (a fused kernel
#: rounds at other points than eager's op-by-op run).
LOW_PRECISION = frozenset({"autocast_bfloat16", "bfloat16_parameters"})
#: Dynamo settings a case needs. Dynamo leaves RNN modules to eager unless
#: ``allow_rnn``; the LSTM case keeps that default (with it, torch's own backends fail
#: too in torch 2.15: ``mkldnn_rnn_layer`` returns no workspace tensor).
DYNAMO_CONFIG: dict[str, dict[str, Any]] = {"gru_two_layers": {"allow_rnn": True}}


def _case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


class Lambda(nn.Module):
    """``f(layers, *inputs)`` as a module over ``layers``."""

    def __init__(self, f: Callable[..., Any], *layers: nn.Module) -> None:
        super().__init__()
        self.f = f
        self.layers = nn.ModuleList(layers)

    def forward(self, *inputs: Any) -> Any:
        return self.f(self.layers, *inputs)


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * x


def _linear(n: int = 4, m: int = 4) -> nn.Linear:
    return nn.Linear(n, m)


@_case
def conv_batchnorm():
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3))
    return m, (torch.randn(4, 3, 10, 10),)


@_case
def groupnorm_silu_upsample():
    m = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1),
        nn.GroupNorm(2, 8),
        nn.SiLU(),
        nn.Upsample(scale_factor=2),
        nn.AdaptiveAvgPool2d(2),
    )
    return m, (torch.randn(2, 4, 6, 6),)


@_case
def maxpool_convtranspose():
    m = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.MaxPool2d(2),
        nn.ConvTranspose2d(4, 2, 2, stride=2),
        nn.Tanh(),
    )
    return m, (torch.randn(2, 2, 8, 8),)


@_case
def layernorm_mlp():
    m = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 8))
    return m, (torch.randn(4, 8),)


@_case
def attention_sdpa():
    def f(layers, x):
        q, k, v = layers[0](x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return Lambda(f, nn.Linear(16, 48)), (torch.randn(2, 8, 16),)


@_case
def transformer_encoder_layer():
    m = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return m, (torch.randn(2, 6, 16),)


@_case
def lstm():
    return nn.LSTM(4, 8, batch_first=True), (torch.randn(2, 5, 4),)


@_case
def gru_two_layers():
    return nn.GRU(4, 6, num_layers=2, batch_first=True), (torch.randn(2, 5, 4),)


@_case
def embedding_padding_idx():
    return nn.Embedding(10, 4, padding_idx=0), (torch.randint(0, 10, (3, 5)),)


@_case
def cross_entropy_ignore_index():
    def f(layers, x, t):
        return F.cross_entropy(layers[0](x), t, ignore_index=-100, label_smoothing=0.1)

    target = torch.tensor([0, 1, -100, 3, 4, -100, 2])
    return Lambda(f, _linear(6, 5)), (torch.randn(7, 6), target)


@_case
def custom_autograd_function():
    return Lambda(lambda layers, x: _Double.apply(layers[0](x)).sum(0), _linear()), (
        torch.randn(3, 4),
    )


@_case
def activation_checkpoint():
    def f(layers, x):
        return checkpoint(lambda t: layers[0](t).sin().cos(), x, use_reentrant=False)

    return Lambda(f, _linear()), (torch.randn(3, 4),)


@_case
def autocast_bfloat16():
    def f(layers, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return layers[0](x).float().relu()

    return Lambda(f, _linear(8, 8)), (torch.randn(4, 8),)


@_case
def bfloat16_parameters():
    m = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8)).to(torch.bfloat16)
    return m, (torch.randn(4, 8, dtype=torch.bfloat16),)


@_case
def no_grad_region():
    def f(layers, x):
        with torch.no_grad():
            m = layers[0](x).mean()
        return layers[0](x) - m

    return Lambda(f, _linear()), (torch.randn(3, 4),)


@_case
def frozen_layer():
    m = Lambda(lambda layers, x: layers[1](layers[0](x).relu()), _linear(4, 8), _linear(8, 2))
    m.layers[0].requires_grad_(False)
    return m, (torch.randn(3, 4),)


@_case
def outputs_view_parameters():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))

        def forward(self, x: torch.Tensor) -> Any:
            y = x @ self.w
            return self.w.t(), self.w[1:], y.t(), y[0], y.view(-1)

    return M(), (torch.randn(4, 4),)


@_case
def returns_input_none_and_dict():
    def f(layers, x):
        y = layers[0](x)
        return x, None, [y.argmax(-1), {"y": y, "s": y.sum()}]

    return Lambda(f, _linear()), (torch.randn(3, 4),)


@_case
def input_mutations():
    def f(layers, x, buf):
        buf.add_(1)
        x[0].mul_(2)
        return layers[0](x + buf)

    return Lambda(f, _linear()), (torch.randn(3, 4), torch.zeros(4))


@_case
def sort_topk_max():
    def f(layers, x):
        y = layers[0](x)
        v, i = y.sort(-1)
        t, _ = y.topk(2, -1)
        mx, am = y.max(-1)
        return v.cumsum(-1) + t.sum(-1, keepdim=True) + mx.unsqueeze(-1), i, am

    return Lambda(f, _linear()), (torch.randn(3, 4),)


@_case
def where_masked_fill_scatter_add():
    def f(layers, x):
        y = layers[0](x)
        y = torch.where(y > 0, y, 0.1 * y).masked_fill(x < -1, 0.0)
        index = torch.arange(4).expand(3, 4)
        return torch.zeros(3, 8).scatter_add(1, index, y)

    return Lambda(f, _linear()), (torch.randn(3, 4),)


@_case
def einsum_and_norms():
    def f(layers, x):
        y = layers[0](x)
        gram = torch.einsum("bij,bkj->bik", y, y).norm(dim=-1)
        return gram + torch.linalg.vector_norm(y, dim=1).sum(-1, keepdim=True)

    return Lambda(f, _linear()), (torch.randn(2, 3, 4),)


@_case
def complex_fft():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.fft.rfft(x * self.w).abs()

    return M(), (torch.randn(3, 8),)


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in _tensors(item)]
    return []


def _step(module: nn.Module, inputs: list[Any]) -> list[torch.Tensor]:
    outs = _tensors(module(*inputs))
    loss = sum((o.float().square().sum() for o in outs if o.requires_grad), torch.zeros(()))
    if loss.requires_grad:
        loss.backward()
    return outs


def check(name: str, backend: str = "aotgrad_eager", *, dynamic: bool = False) -> int:
    """Train case ``name`` two steps compiled with ``backend`` and eagerly; raise
    ``AssertionError`` (or the compiler's error) at the first difference. Returns how
    many graphs aotgrad compiled (or read from its caches) on the way."""
    from aotgrad import observe

    compiled_graphs: list[Any] = []
    stop = observe.on_compiled(compiled_graphs.append)
    try:
        _check(name, backend, dynamic)
    finally:
        stop()
    return len(compiled_graphs)


def _check(name: str, backend: str, dynamic: bool) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    module, inputs = CASES[name]()
    reference = copy.deepcopy(module)
    options = {"strict": True} if backend.startswith("aotgrad") else None
    compiled = torch.compile(module, backend=backend, dynamic=dynamic, options=options)
    low_precision = name in LOW_PRECISION
    tol = {"rtol": 2e-2, "atol": 2e-2} if low_precision else {"rtol": 1e-4, "atol": 1e-4}
    with torch._dynamo.config.patch(**DYNAMO_CONFIG.get(name, {})):
        _compare(module, reference, compiled, inputs, tol)


def _compare(
    module: nn.Module, reference: nn.Module, compiled: Any, inputs: Any, tol: dict[str, float]
) -> None:
    ours = [x.clone() for x in inputs]
    theirs = [x.clone() for x in inputs]
    for _ in range(2):
        torch.testing.assert_close(_step(compiled, ours), _step(reference, theirs), **tol)
        torch.testing.assert_close(ours, theirs)  # input mutations
        for (pname, p), q in zip(module.named_parameters(), reference.parameters()):
            if q.grad is None:
                assert p.grad is None, f"{pname} got a gradient eager does not give"
            else:
                torch.testing.assert_close(p.grad, q.grad, **tol, msg=f"grad of {pname}")
        torch.testing.assert_close(list(module.buffers()), list(reference.buffers()))
