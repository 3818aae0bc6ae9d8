"""The fidelity generator's vocabulary: the prelude every program starts with (the custom
autograd Functions programs call), the shapes' views and suffixes, and the op templates
(unary, binary, matmul, in-place) ``tests/fidelity_generator.py`` draws statements from.
"""

from __future__ import annotations

import math

PRELUDE = '''\
import torch


class HalfGrad(torch.autograd.Function):
    """Identity forward (returns its input itself), backward g * 0.5."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 0.5


class ViewOf(torch.autograd.Function):
    """Returns a view of its input; backward g * 2."""

    @staticmethod
    def forward(ctx, x):
        return x.view(x.shape)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class DirtyMul(torch.autograd.Function):
    """Writes its input in place (x *= 2), ctx.mark_dirty, returns it."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class SavedSquare(torch.autograd.Function):
    """x * x with the input saved for backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

'''


def bcast(a, b):
    """Broadcast shape of two shapes, or None."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


def _numel(s):
    return math.prod(s)


class Val:
    """A name in the generated function and what the generator believes about it."""

    def __init__(self, name, cell, kind, bf16=False, multi=False, group=None):
        self.name = name
        # values that may share memory share a group (views, detach, the same input)
        self.group = group if group is not None else object()
        # non-overlapping and dense (eager's partial-overlap check of in-place ops works)
        self.dense = False
        self.cell = cell  # [shape]; shared by names for the same tensor object
        self.kind = kind  # input, input_view, inter, inter_view, detached
        self.bf16 = bf16
        self.multi = multi

    @property
    def shape(self):
        return self.cell[0]

    @shape.setter
    def shape(self, s):
        self.cell[0] = s


def views_for(shape):
    """(template, new shape) for view ops applicable to ``shape``; {v} is the operand."""
    nd, n = len(shape), _numel(shape)
    out = [
        ("{v}.view_as({v})", shape),
        ("{v}.view(-1)", (n,)),
        ("{v}.unsqueeze(0)", (1, *shape)),
        (
            "{v}.expand(2, " + ", ".join(map(str, shape)) + ")" if nd else "{v}.expand(2)",
            (2, *shape),
        ),
        ("{v}.squeeze()", tuple(d for d in shape if d != 1)),
    ]
    if nd <= 2:
        out.append(("{v}.t()", tuple(reversed(shape))))
    if nd >= 1:
        out.append(("{v}[0]", shape[1:]))
        out.append(("{v}[::2]", ((shape[0] + 1) // 2, *shape[1:])))
        if shape[0] >= 3:
            out.append(("{v}[1:3]", (2, *shape[1:])))
        if shape[-1] >= 3:
            out.append(("{v}.narrow(-1, 1, 2)", (*shape[:-1], 2)))
        if shape[-1] == 4:
            out.append(("{v}.unflatten(-1, (2, 2))", (*shape[:-1], 2, 2)))
    if nd == 2:
        out.append(("{v}.diagonal()", (min(shape),)))
        out.append(("{v}[:, 1]", (shape[0],)))
        out.append(("{v}.mT", (shape[1], shape[0])))
    if nd >= 2:
        s = list(shape)
        s[0], s[1] = s[1], s[0]
        out.append(("{v}.transpose(0, 1)", tuple(s)))
    if n % 2 == 0 and n >= 2:
        out.append(("{v}.reshape(2, -1)", (2, n // 2)))
    if n >= 4:
        out.append(("{v}.as_strided((2, 2), (1, 2))", (2, 2)))
    return out


def suffixes_for(shape):
    """(suffix, shape) for in-place targets: the value itself, or a view/slice of it."""
    nd = len(shape)
    out = [("", shape), ("", shape)]
    if nd >= 1:
        out.append(("[0]", shape[1:]))
        if shape[0] >= 3:
            out.append(("[1:3]", (2, *shape[1:])))
    if nd == 2:
        out.append(
            (
                "[:, 1:3]" if shape[1] >= 3 else "[:, 0]",
                (shape[0], 2) if shape[1] >= 3 else (shape[0],),
            )
        )
        out.append((".t()", (shape[1], shape[0])))
        out.append((".diagonal()", (min(shape),)))
    return out


UNARY = [
    "{v}.sin()",
    "{v}.tanh()",
    "torch.sigmoid({v})",
    "{v}.relu()",
    "-{v}",
    "{v}.exp()",
    "{v} * {v}",
    "{v}.abs()",
    "{v}.clamp(-0.5, 0.5)",
    "{v}.pow(2)",
    "{v}.cos()",
    "{v}.clone()",
    "{v}.contiguous()",  # returns self when contiguous
    "{v}.to(DT)",  # returns self (same dtype)
    "{v}.softmax(-1)",
    "{v}.cumsum(-1)",
]
BINARY = [
    "{a} + {b}",
    "{a} - {b}",
    "{a} * {b}",
    "torch.maximum({a}, {b})",
    "torch.where({a} > 0, {a}, {b})",
    "{a} / ({b}.abs() + 1)",
    "torch.lerp({a}, {b}, 0.3)",
]
MATMUL = ["{a} @ {b}", "torch.mm({a}, {b})", "{a}.matmul({b})", "torch.addmm({b}, {a}, {b})"]
INPLACE_UNARY = [
    "{T}.zero_()",
    "{T}.fill_(0.25)",
    "{T}.relu_()",
    "{T}.sin_()",
    "{T}.clamp_(-1, 1)",
    "{T}.add_(1)",
    "{T}.mul_(2)",
    "{T}.masked_fill_({T} > 0, 0.5)",
]
INPLACE_BINARY = [
    "{T}.add_({O})",
    "{T}.mul_({O})",
    "{T}.sub_({O})",
    "{T}.copy_({O})",
    "{T}.copy_({O})",
    "{T}.addcmul_({O}, {O})",
    "{T}.lerp_({O}, 0.5)",
]
