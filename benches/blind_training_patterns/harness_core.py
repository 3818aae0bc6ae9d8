import math
import traceback
import warnings

import torch

ENTRIES = ["aot_mincut", "aot_default", "compile"]


def make_compilers(entry):
    import aotgrad
    from aotgrad.partition import default_partition, min_cut_rematerialization_partition

    if entry == "eager":
        return (lambda f: f), (lambda m: m)
    if entry in ("aot_mincut", "aot_default"):
        pf = min_cut_rematerialization_partition if entry == "aot_mincut" else default_partition
        return (
            lambda f: aotgrad.aot_function(f, aotgrad.nop, partition_fn=pf),
            lambda m: aotgrad.aot_module(m, aotgrad.nop, partition_fn=pf),
        )
    if entry == "compile":

        def C(f):
            torch._dynamo.reset()
            return torch.compile(f, backend="aotgrad_eager")

        def M(m):
            torch._dynamo.reset()
            return torch.compile(m, backend="aotgrad_eager")

        return C, M
    raise ValueError(entry)


def snap(x, depth=0):
    if depth > 6:
        return ("deep",)
    if isinstance(x, torch.Tensor):
        d = {
            "__T": True,
            "dtype": str(x.dtype),
            "shape": list(x.shape),
            "rg": bool(x.requires_grad),
            "leaf": bool(x.is_leaf),
            "retains_grad": bool(getattr(x, "retains_grad", False)),
        }
        v = x.detach()
        if v.is_floating_point() or v.is_complex():
            d["val"] = v.to(torch.float64).clone() if not v.is_complex() else v.clone()
        else:
            d["val"] = v.clone()
        g = None
        if x.is_leaf or getattr(x, "retains_grad", False):
            g = x.grad
        d["grad"] = snap(g, depth + 1) if g is not None else None
        return d
    if isinstance(x, dict):
        return {
            "__D": {str(k): snap(v, depth + 1) for k, v in x.items()},
            "__keys": [str(k) for k in x],
        }
    if isinstance(x, (list, tuple)):
        return {"__L": type(x).__name__, "items": [snap(v, depth + 1) for v in x]}
    if isinstance(x, (int, float, bool, str)) or x is None:
        return x
    if isinstance(x, torch.nn.Module):
        return {
            "__M": {k: snap(v, depth + 1) for k, v in list(x.state_dict(keep_vars=True).items())}
        }
    return repr(type(x))


def errstr(e):
    mro = [c.__name__ for c in type(e).__mro__]
    msg = str(e).splitlines()[0][:200] if str(e) else ""
    return {"__E": True, "mro": mro, "msg": msg}


class Recorder:
    def __init__(self):
        self.rec = {}
        self.order = []

    def __call__(self, name, value):
        self.rec[name] = snap(value)
        self.order.append(name)
        return value

    def try_(self, name, thunk):
        try:
            r = thunk()
            self.rec[name + ":raised"] = None
            return r
        except Exception as e:
            self.rec[name + ":raised"] = errstr(e)
            return None


def compare(a, b, path, rtol, atol, out):
    if (isinstance(a, dict) and a.get("__E")) or (isinstance(b, dict) and b.get("__E")):
        if not (isinstance(a, dict) and a.get("__E")):
            out.append(f"{path}: eager no error, aot raised {b['mro'][0]}: {b['msg']}")
            return
        if not (isinstance(b, dict) and b.get("__E")):
            out.append(f"{path}: eager raised {a['mro'][0]}: {a['msg']}, aot did not raise")
            return
        if a["mro"][0] not in b["mro"]:
            out.append(f"{path}: exception type eager={a['mro'][0]} aot={b['mro'][0]} ({b['msg']})")
        return
    if isinstance(a, dict) and a.get("__T"):
        if not (isinstance(b, dict) and b.get("__T")):
            out.append(f"{path}: eager tensor vs aot {short(b)}")
            return
        for k in ("dtype", "shape", "rg", "leaf", "retains_grad"):
            if a[k] != b[k]:
                out.append(f"{path}.{k}: eager={a[k]} aot={b[k]}")
        if a["shape"] == b["shape"]:
            va, vb = a["val"], b["val"]
            try:
                if va.is_floating_point() or va.is_complex():
                    vb2 = vb.to(va.dtype)
                    if not torch.allclose(va, vb2, rtol=rtol, atol=atol, equal_nan=True):
                        diff = (va - vb2).abs()
                        diff = diff[~torch.isnan(diff)]
                        md = diff.max().item() if diff.numel() else float("nan")
                        out.append(
                            f"{path}.val: differ (max abs diff {md:.3g}); eager={fmt(va)} aot={fmt(vb2)}"
                        )
                else:
                    if not torch.equal(va, vb.to(va.dtype)):
                        out.append(f"{path}.val: eager={fmt(va)} aot={fmt(vb)}")
            except Exception as e:
                out.append(f"{path}.val: compare error {e}")
        if (a["grad"] is None) != (b["grad"] is None):
            out.append(
                f"{path}.grad: eager={'None' if a['grad'] is None else fmt(a['grad']['val'])} aot={'None' if b['grad'] is None else fmt(b['grad']['val'])}"
            )
        elif a["grad"] is not None:
            compare(a["grad"], b["grad"], path + ".grad", rtol, atol, out)
        return
    if isinstance(a, dict) and "__D" in a:
        if not (isinstance(b, dict) and "__D" in b):
            out.append(f"{path}: eager dict vs aot {short(b)}")
            return
        if a["__keys"] != b["__keys"]:
            out.append(f"{path}: keys eager={a['__keys']} aot={b['__keys']}")
        for k in a["__D"]:
            if k in b["__D"]:
                compare(a["__D"][k], b["__D"][k], f"{path}[{k!r}]", rtol, atol, out)
        return
    if isinstance(a, dict) and "__L" in a:
        if not (isinstance(b, dict) and "__L" in b):
            out.append(f"{path}: eager {a['__L']} vs aot {short(b)}")
            return
        if a["__L"] != b["__L"] or len(a["items"]) != len(b["items"]):
            out.append(
                f"{path}: container eager={a['__L']}[{len(a['items'])}] aot={b['__L']}[{len(b['items'])}]"
            )
        for i, (x, y) in enumerate(zip(a["items"], b["items"])):
            compare(x, y, f"{path}[{i}]", rtol, atol, out)
        return
    if isinstance(a, dict) and "__M" in a:
        if not (isinstance(b, dict) and "__M" in b):
            out.append(f"{path}: eager module vs aot {short(b)}")
            return
        for k in a["__M"]:
            if k not in b["__M"]:
                out.append(f"{path}.{k}: missing in aot")
            else:
                compare(a["__M"][k], b["__M"][k], f"{path}.{k}", rtol, atol, out)
        return
    if isinstance(a, float) and isinstance(b, float):
        if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol + rtol * abs(a)):
            out.append(f"{path}: eager={a} aot={b}")
        return
    if a != b:
        out.append(f"{path}: eager={short(a)} aot={short(b)}")


def short(x):
    if isinstance(x, dict) and x.get("__T"):
        return "tensor" + str(x["shape"])
    s = repr(x)
    return s if len(s) < 200 else s[:200] + "..."


def fmt(t):
    t = t.flatten()
    s = [round(float(v), 5) if not isinstance(v, bool) else v for v in t[:6].tolist()]
    return f"{s}{'...' if t.numel() > 6 else ''}"


def run_program(prog, entry):
    torch.manual_seed(0)
    torch._dynamo.reset()
    C, M = make_compilers(entry)
    R = Recorder()
    wlist = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            prog(C, M, R)
            R.rec["__program_error"] = None
        except Exception as e:
            tb = traceback.format_exc().splitlines()
            R.rec["__program_error"] = errstr(e)
            R.rec["__tb"] = "\n".join(tb[-6:])
        for x in w:
            wlist.append(
                (
                    x.category.__name__,
                    str(x.message).splitlines()[0][:200] if str(x.message) else "",
                )
            )
    return R.rec, wlist
