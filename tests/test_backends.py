"""torch.compile(backend="aotgrad" / "aotgrad_eager") against eager PyTorch."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch

from aotgrad.models import GPT, GPTConfig


def _train_pair(backend: str, steps: int = 3, options: dict | None = None):
    torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32)
    eager = GPT(cfg)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend=backend, options=options)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randint(0, 32, (4, 16), generator=g)
        y = torch.randint(0, 32, (4, 16), generator=g)
        for m, opt in ((compiled, opt_c), (eager, opt_e)):
            opt.zero_grad()
            loss = m(x, y)
            loss.backward()
            opt.step()
        loss_c, loss_e = compiled(x, y), eager(x, y)
        torch.testing.assert_close(loss_c, loss_e, rtol=1e-4, atol=1e-5)
    for (name, a), b in zip(eager.named_parameters(), model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)
    return compiled


def test_aotgrad_eager_backend_trains_like_eager():
    _train_pair("aotgrad_eager")


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_aotgrad_inductor_backend_trains_like_eager(partitioner):
    _train_pair("aotgrad", steps=2, options={"partitioner": partitioner})


def test_inference_under_no_grad_uses_inductor():
    torch._dynamo.reset()
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    c = torch.compile(m, backend="aotgrad")
    x = torch.randn(4, 8)
    with torch.no_grad():
        out = c(x)
        assert not out.requires_grad
        torch.testing.assert_close(out, m(x))


def test_entry_point_registers_backends_without_import():
    code = textwrap.dedent(
        """
        import sys, torch
        f = torch.compile(lambda x: (x.sin() * 2).sum(), backend="aotgrad_eager")
        x = torch.randn(3, requires_grad=True)
        f(x).backward()
        assert torch.allclose(x.grad, 2 * x.cos())
        print("ok", "aotgrad" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip().startswith("ok")


def test_unknown_option_is_a_clear_error():
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + 1, backend="aotgrad_eager", options={"bogus": 1})
    with pytest.raises(Exception, match="unknown aotgrad backend options"):
        f(torch.randn(2))
