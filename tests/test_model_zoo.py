"""Every model of the zoo (``tests/zoo.py``) trains like eager through aotgrad (strict: no
eager fallback). Inductor's code generation is exercised on a few kinds (its layout
and symbol handling); ``benches/model_sweep.py`` runs every case through both backends."""

from __future__ import annotations

import pytest

import zoo


@pytest.mark.parametrize("name", sorted(zoo.CASES))
def test_trains_like_eager(name):
    graphs = zoo.check(name, "aotgrad_eager")
    # Dynamo leaves nn.LSTM to eager (see zoo.DYNAMO_CONFIG); every other case must
    # really have gone through aotgrad.
    assert graphs == 0 if name == "lstm" else graphs > 0


@pytest.mark.parametrize("name", ["layernorm_mlp", "input_mutations", "outputs_view_parameters"])
def test_trains_like_eager_with_dynamic_shapes(name):
    zoo.check(name, "aotgrad_eager", dynamic=True)


@pytest.mark.parametrize("name", ["maxpool_convtranspose", "sort_topk_max", "attention_sdpa"])
def test_trains_like_eager_through_inductor(name):
    zoo.check(name, "aotgrad")


def test_a_difference_is_caught(monkeypatch):
    """The check itself fails when a compiled gradient is wrong."""
    import torch

    real = torch.compile

    def wrong_gradients(module, **kwargs):
        compiled = real(module, **kwargs)

        def run(*args):
            out = compiled(*args)
            return out * 1.5 if isinstance(out, torch.Tensor) else out

        return run

    monkeypatch.setattr(torch, "compile", wrong_gradients)
    with pytest.raises(AssertionError):
        zoo.check("layernorm_mlp")
