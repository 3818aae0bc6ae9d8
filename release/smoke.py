"""``make wheel-check``'s smoke test of an *installed* aotgrad (a wheel or an sdist build)
in a fresh venv. Run from outside the repository, so that only the installed package can
be imported. Prints one line per check; exits non-zero on the first failure.

1. ``torch.compile``'s ``torch_dynamo_backends`` entry point finds the backend without
   aotgrad being imported first;
2. two training steps of the embedded GPT under ``backend="aotgrad"`` (Inductor) equal
   eager's (losses and parameters);
3. ``aotgrad.frame_stack`` on this interpreter: the room it makes on CPython 3.11+, a
   no-op before;
4. the ``aotgrad`` console script: ``--version`` and ``demo --steps 2``.
"""

from __future__ import annotations

import copy
import importlib.metadata as md
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def say(check: str, detail: str) -> None:
    print(f"  ok  {check}: {detail}", flush=True)


def entry_point() -> None:
    found = {ep.name: ep.value for ep in md.entry_points(group="torch_dynamo_backends")}
    assert found.get("aotgrad") == "aotgrad.backends:aotgrad_backend", found
    assert found.get("aotgrad_eager") == "aotgrad.backends:aotgrad_eager_backend", found
    import torch._dynamo

    assert "aotgrad" not in sys.modules, "aotgrad was imported before the lookup"
    assert "aotgrad" in torch._dynamo.list_backends(exclude_tags=())
    backend = torch._dynamo.lookup_backend("aotgrad")
    import aotgrad

    where = Path(aotgrad.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents, f"aotgrad imported from {where}"
    say("entry point", f"torch_dynamo_backends -> {backend.__module__}.{backend.__name__}")
    say("installed", f"aotgrad {aotgrad.__version__} at {where.parent}")


def two_gpt_steps() -> None:
    import torch

    from aotgrad.tools.demo import batches, load_corpus
    from aotgrad.tools.models import GPT, GPTConfig

    text = load_corpus()
    vocab = sorted(set(text))
    cfg = GPTConfig(vocab_size=len(vocab), block_size=32, n_layer=2, n_embd=64)
    torch.manual_seed(0)
    eager = GPT(cfg)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="aotgrad")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    t0 = time.perf_counter()
    for x, y in batches(text, vocab, seq=32, batch=4, steps=2, seed=0):
        for net, opt, out in ((compiled, opt_c, "c"), (eager, opt_e, "e")):
            opt.zero_grad(set_to_none=True)
            loss = net(x, y)
            loss.backward()
            opt.step()
            losses.append((out, loss.item()))
        torch.testing.assert_close(
            torch.tensor(losses[-2][1]), torch.tensor(losses[-1][1]), rtol=1e-4, atol=1e-5
        )
    for (name, p_c), p_e in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(
            p_c, p_e, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}"
        )
    pairs = ", ".join(f"{a[1]:.5f} = {b[1]:.5f}" for a, b in zip(losses[::2], losses[1::2]))
    say(
        "GPT, backend=aotgrad",
        f"2 steps equal to eager (loss aotgrad = eager: {pairs}; parameters equal) "
        f"in {time.perf_counter() - t0:.0f} s",
    )


def frame_stack() -> None:
    from aotgrad import frame_stack as fs

    def down(n: int) -> int:
        return 0 if n == 0 else down(n - 1) + 1

    def faults() -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(5_000):
            down(300)
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    assert fs.with_frame_room(down)(900) == 900
    plain, roomy = faults(), fs.with_frame_room(faults)()
    version = f"CPython {sys.version_info.major}.{sys.version_info.minor}"
    if not fs.APPLIES:
        say("frame stack", f"{version}: no frame chunks, with_frame_room is a no-op")
    elif plain < 5_000:
        say(
            "frame stack",
            f"{version}: chunks kept by the interpreter ({plain} faults): nothing to fix",
        )
    else:
        assert roomy < 500, (plain, roomy)
        say(
            "frame stack", f"{version}: page faults of 5000 deep calls {plain} -> {roomy} with room"
        )


def console_script(workdir: Path) -> None:
    exe = shutil.which("aotgrad", path=str(Path(sys.executable).parent))
    assert exe, "no aotgrad console script in the venv"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    say("aotgrad --version", out.stdout.strip())
    t0 = time.perf_counter()
    demo = subprocess.run(
        [exe, "demo", "--steps", "2"], capture_output=True, text=True, cwd=workdir, check=False
    )
    if demo.returncode != 0:
        print(demo.stdout, demo.stderr, sep="\n")
        raise SystemExit(f"aotgrad demo --steps 2 exited {demo.returncode}")
    parity = next((ln.strip() for ln in demo.stdout.splitlines() if "parity" in ln), "?")
    say("aotgrad demo --steps 2", f"{parity} ({time.perf_counter() - t0:.0f} s)")


def main() -> int:
    workdir = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    os.environ["AOTGRAD_CACHE_DIR"] = str(workdir / "aotgrad-cache")
    print(f"smoke test on {sys.version.split()[0]} ({sys.executable})", flush=True)
    entry_point()
    two_gpt_steps()
    frame_stack()
    console_script(workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
