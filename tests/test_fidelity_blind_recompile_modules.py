"""Blind recompile fidelity, module programs: one aot_module / torch.compile object called
again and again while its parameters, buffers, attributes and training mode change between
calls; every call must observe what eager observes. Builders, runners and the known-open
table: ``blind_recompile_harness``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from blind_recompile_harness import (
    BF16,
    F32,
    F64,
    MOD_COMPILERS,
    A,
    check_module,
    leaf,
)


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).tanh()


class Drop(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return nn.functional.dropout(self.lin(x), 0.5, self.training)


class BN(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x) * 2


class Buf(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        self.count.add_(1)
        return x * self.w + self.count


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x * self.weight


def _set_rg(flag):
    def m(mod):
        for p in mod.parameters():
            p.requires_grad_(flag)

    return m


def _replace_weight(mod):
    torch.manual_seed(7)
    mod.weight = nn.Parameter(torch.randn(3, dtype=mod.weight.dtype))


def _replace_weight_shape(mod):
    torch.manual_seed(7)
    mod.weight = nn.Parameter(torch.randn(1))


def _weight_data(mod):
    with torch.no_grad():
        mod.weight.mul_(3)


def _double(mod):
    mod.double()


def _float(mod):
    mod.float()


def _train(mod):
    mod.train()


def _eval(mod):
    mod.eval()


def _nothing(mod):
    pass


def mx(*shape, dtype=F32, rg=True):
    return A(leaf(*shape, dtype=dtype, rg=rg))


MODULES: dict[str, tuple[Any, list[tuple[Any, Any]]]] = {
    "mod_param_rg_toggle": (
        Lin,
        [(_nothing, mx(2, 4)), (_set_rg(False), mx(2, 4)), (_set_rg(True), mx(2, 4))],
    ),
    "mod_double": (Lin, [(_nothing, mx(2, 4)), (_double, mx(2, 4, dtype=F64)), (_float, mx(2, 4))]),
    "mod_input_dtype_mismatch": (
        Lin,
        [(_nothing, mx(2, 4)), (_nothing, mx(2, 4, dtype=F64)), (_nothing, mx(2, 4))],
    ),
    "mod_replace_weight": (Scale, [(_nothing, mx(3)), (_replace_weight, mx(3)), (_nothing, mx(3))]),
    "mod_replace_weight_shape": (Scale, [(_nothing, mx(3)), (_replace_weight_shape, mx(3))]),
    "mod_weight_inplace": (Scale, [(_nothing, mx(3)), (_weight_data, mx(3)), (_nothing, mx(3))]),
    "mod_buffer_count": (
        Buf,
        [(_nothing, mx(3)), (_nothing, mx(3, rg=False)), (_nothing, mx(2, 3))],
    ),
    "mod_dropout_train_eval": (Drop, [(_eval, mx(2, 4)), (_train, mx(0, 4)), (_eval, mx(2, 4))]),
    "mod_batchnorm_train_eval": (
        BN,
        [(_nothing, mx(5, 4)), (_eval, mx(5, 4)), (_train, mx(3, 4)), (_eval, mx(2, 4))],
    ),
    "mod_input_shape": (Lin, [(_nothing, mx(2, 4)), (_nothing, mx(4)), (_nothing, mx(3, 2, 4))]),
}


class Attr(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.scale = 2.0
        self.use_bias = True

    def forward(self, x):
        y = x * self.w * self.scale
        return y + 1 if self.use_bias else y


class MaybeBuf(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        out = x * self.w
        if hasattr(self, "extra"):
            out = out + self.extra
        return out


class TwoParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(3))
        self.b = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x * self.a + self.b.sin()


def _attr(name, v):
    return lambda m: setattr(m, name, v)


def _add_buffer(m):
    m.register_buffer("extra", torch.full((3,), 10.0))


def _replace_buffer(m):
    m.count = torch.full((3,), 100.0)


def _b_rg_off(m):
    m.b.requires_grad_(False)


def _b_double(m):
    m.b.data = m.b.data.double()


def _swap_w_data(m):
    m.w.data = torch.arange(3.0) + 1


def _half(m):
    m.bfloat16()


def _fwd_hook(m):
    m.register_forward_hook(lambda mod, inp, out: out * 10)


def _replace_param_nograd(m):
    m.weight = nn.Parameter(torch.ones(3), requires_grad=False)


def _replace_with_tensor(m):
    del m.weight
    m.weight = torch.full((3,), 4.0)


def _drop_train_seeded(m):
    m.train()
    torch.manual_seed(3)


MODULES.update(
    {
        "mod_python_attr_scale": (
            Attr,
            [(_nothing, mx(3)), (_attr("scale", 5.0), mx(3)), (_attr("use_bias", False), mx(3))],
        ),
        "mod_register_buffer_between": (
            MaybeBuf,
            [(_nothing, mx(3)), (_add_buffer, mx(3)), (_nothing, mx(3))],
        ),
        "mod_replace_buffer": (
            Buf,
            [(_nothing, mx(3)), (_replace_buffer, mx(3)), (_nothing, mx(3))],
        ),
        "mod_one_param_rg_off": (
            TwoParams,
            [(_nothing, mx(3)), (_b_rg_off, mx(3)), (_nothing, mx(3, rg=False))],
        ),
        "mod_one_param_double": (TwoParams, [(_nothing, mx(3)), (_b_double, mx(3))]),
        "mod_param_data_swap": (
            Attr,
            [(_nothing, mx(3)), (_swap_w_data, mx(3)), (_nothing, mx(3))],
        ),
        "mod_bfloat16": (
            Lin,
            [(_nothing, mx(2, 4)), (_half, mx(2, 4, dtype=BF16)), (_float, mx(2, 4))],
        ),
        "mod_forward_hook_added": (Scale, [(_nothing, mx(3)), (_fwd_hook, mx(3))]),
        "mod_replace_param_nograd": (
            Scale,
            [(_nothing, mx(3)), (_replace_param_nograd, mx(3)), (_replace_weight, mx(3))],
        ),
        "mod_replace_param_with_tensor": (
            Scale,
            [(_nothing, mx(3)), (_replace_with_tensor, mx(3))],
        ),
        "mod_dropout_train_values": (
            Drop,
            [(_eval, mx(2, 4)), (_drop_train_seeded, mx(2, 4)), (_eval, mx(2, 4))],
        ),
        "mod_rg_off_nograd_input": (
            Lin,
            [
                (_set_rg(False), mx(2, 4, rg=False)),
                (_set_rg(True), mx(2, 4, rg=False)),
                (_nothing, mx(2, 4)),
            ],
        ),
    }
)


@pytest.mark.parametrize("comp", list(MOD_COMPILERS))
@pytest.mark.parametrize("name", list(MODULES))
def test_module_recompile_like_eager(name, comp, request):
    check_module(MODULES, name, comp, request)
