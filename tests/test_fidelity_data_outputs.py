"""Outputs that are an input's ``.data``, or views of one (a blind helper's find, round 52).

Eager's ``x.data`` shares ``x``'s storage but has a version counter of its own: a write
the caller makes to it afterwards does not move ``x``'s count, so eager's backward does
not see ``x``'s saved values as modified (the usual way to update a tensor out of
autograd). aotgrad returned an alias that shared ``x``'s counter: the caller's write
then made the backward raise "modified by an inplace operation", where eager's runs.
"""

from __future__ import annotations

import pytest
import torch

from eager_oracle import COMPILERS

D = torch.float64


def _data(x):
    return x.data, x.sin()


def _data_written_inside(x):
    d = x.data
    d.mul_(2)
    return d, x.sin()


def _view_of_data(x):
    return x.data.t(), x.sin()


def _two_views_of_one_data(x):
    d = x.data
    return d.t(), x.sin(), d[0]


def _views_of_two_datas(x):
    return x.data[1], x.sin(), x.data[0]


def _data_and_its_view(x):
    d = x.data
    return d, x.sin(), d[1]


PROGRAMS = [
    _data,
    _data_written_inside,
    _view_of_data,
    _two_views_of_one_data,
    _views_of_two_datas,
    _data_and_its_view,
]


def _seen(fn):
    torch.manual_seed(0)
    x = torch.randn(2, 2, dtype=D, requires_grad=True)
    first, grad, *rest = fn(x)
    outs = [first, *rest]
    seen = [[o._version, o.requires_grad, o._is_view(), o.is_leaf] for o in outs]
    seen.append([a._base is b._base or a._base is b for a in outs for b in outs])
    seen.append(x._version)
    first.mul_(2)  # (the caller's write: eager's moves the .data's count only)
    seen.append([x._version, *(o._version for o in outs)])
    seen.append(x.detach().clone())
    try:
        grad.sum().backward()
    except RuntimeError as e:
        return [*seen, str(e)[:60]]
    return [*seen, x.grad]


#: Where Dynamo itself departs from eager (its ``backend="eager"`` observes the same as
#: aotgrad under Dynamo): a ``.data`` written inside the graph, or returned beside a
#: view of it. There, Dynamo's own backend is the reference.
DYNAMO_OWN = {_data_written_inside, _data_and_its_view}


def _dynamo_eager(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="eager")


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_data_outputs_have_their_own_version_counter(fn, compiler):
    dynamo_own = compiler.startswith("dynamo") and fn in DYNAMO_OWN
    want = _seen(_dynamo_eager(fn) if dynamo_own else fn)
    got = _seen(COMPILERS[compiler](fn))
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, msg=f"observation {k}")
        else:
            assert g == w, f"observation {k}: eager {w}, compiled {g}"
