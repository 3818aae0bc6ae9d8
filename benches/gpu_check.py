"""The GPU check, run once on a machine with a CUDA device (see README, "GPU").

1. ``torch.compile(model, backend="aotgrad")`` on CUDA: the forward and the
   backward are compiled by Inductor into Triton kernels (``@triton.jit`` counted
   in the code Inductor generated for each graph).
2. A training step of a small GPT matches eager (loss and every gradient), and
   so do two steps of a conv + batch-norm net, static and dynamic shapes.
3. The step time of aotgrad vs backend="inductor" and eager, for the record.

Prints one JSON line with every figure; exits non-zero if a check fails.

    python benches/gpu_check.py [--steps 5]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    cache = tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ.setdefault("AOTGRAD_CACHE", "0")
    import torch

    import aotgrad.backends as backends
    from aotgrad.tools.models import GPT, GPTConfig

    generated: dict[str, list[str]] = {"forward": [], "backward": []}

    def recording(name: str, compiler):
        def wrapper(gm, example_inputs):
            out = compiler(gm, example_inputs)
            generated[name].append(getattr(out, "source_code", ""))
            return out

        return wrapper

    backends.inductor_forward = recording("forward", backends.inductor_forward)
    backends.inductor_backward = recording("backward", backends.inductor_backward)

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=96, block_size=64, n_layer=4, n_embd=128)
    eager = GPT(cfg).to(dev)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="aotgrad")
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, 96, (8, 64), generator=g).to(dev)
    y = torch.randint(0, 96, (8, 64), generator=g).to(dev)
    t0 = time.perf_counter()
    loss_c = compiled(x, y)
    loss_c.backward()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    loss_e = eager(x, y)
    loss_e.backward()
    grad_diff = max(
        (a.grad - b.grad).abs().max().item()
        for a, b in zip(model.parameters(), eager.parameters(), strict=True)
    )
    loss_diff = abs(loss_c.item() - loss_e.item()) / abs(loss_e.item())
    triton = {k: sum(src.count("@triton.jit") for src in v) for k, v in generated.items()}

    def step_ms(m: torch.nn.Module) -> float:
        times = []
        for _ in range(args.steps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            m(x, y).backward()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return 1e3 * sorted(times)[len(times) // 2]

    # A conv net, static and dynamic: Inductor stores saved conv outputs channels-last;
    # the backward must be compiled for those strides (and dynamic shapes cached).
    torch.backends.cudnn.allow_tf32 = False
    conv_grad_diff = 0.0
    for dynamic in (False, True):  # no dynamo reset: the GPT's compiled code must stay
        conv = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 4, 3),
        ).to(dev)
        conv_ref = copy.deepcopy(conv)
        conv_c = torch.compile(conv, backend="aotgrad", dynamic=dynamic, options={"strict": True})
        for batch in (4, 6):
            xin = torch.randn(batch, 3, 16, 16, device=dev)
            conv_c(xin).square().sum().backward()
            conv_ref(xin).square().sum().backward()
            # Relative to the largest gradient of all: conv1's bias gets ~0 (batch norm
            # subtracts the mean), where per-tensor ratios measure only rounding noise.
            pairs = list(zip(conv.parameters(), conv_ref.parameters(), strict=True))
            scale = max(b.grad.abs().max().item() for _, b in pairs)
            diff = max((a.grad - b.grad).abs().max().item() for a, b in pairs)
            conv_grad_diff = max(conv_grad_diff, diff / scale)

    inductor = torch.compile(copy.deepcopy(eager), backend="inductor")
    step_ms(inductor)  # compile
    result = {
        "device": torch.cuda.get_device_name(),
        "compile_s": compile_s,
        "loss_rel_diff": loss_diff,
        "max_grad_abs_diff": grad_diff,
        "conv_max_grad_rel_diff": conv_grad_diff,
        "triton_kernels_forward": triton["forward"],
        "triton_kernels_backward": triton["backward"],
        "step_ms_aotgrad": step_ms(compiled),
        "step_ms_inductor": step_ms(inductor),
        "step_ms_eager": step_ms(eager),
    }
    ok = (
        loss_diff < 1e-4 and grad_diff < 1e-3 and conv_grad_diff < 1e-3 and min(triton.values()) > 0
    )
    result["ok"] = ok
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
