"""Oracle of train.agc_clip_factor (docs/training.md, "Gradient clipping"): timm 1.0.31's
adaptive_clip_grad (timm/utils/agc.py, what train.py's --clip-mode agc --clip-grad X calls) against
the host's (agc_driver) on the same weights and gradients.

Parameters: conv.weight (4-D, 4 output units), conv.bias (1-D: one unit), fc.weight (2-D),
zero.weight (all zeros: its units clip against eps x factor), head.weight and head.bias (the
classifier timm's train.py leaves unclipped: model_parameters(model, exclude_head=True) drops the
last two parameters; the host's train.agc_ignore = ["head.*"]). Each output unit's gradient gets
its own magnitude, so some units are clipped and some are not (both counted; the test fails if
either is missing).

1. The clip alone, every parameter, norm types 2 and inf: the clipped gradients must equal
   timm's within 1e-6 relative (max |a - b| / max |b| per tensor).
2. Five steps of SGD (momentum 0.9, torch.optim.SGD(foreach=False) as the host's for_loop), the
   clip before every step as in timm's loop, the head left out: in fp32, and in fp16, where the
   host's gradients arrive multiplied by the scaler's scale and are unscaled before the clip, and
   step 3's infinite gradient makes the scaler skip the step (timm's loop: no step). Weights
   within 1e-6 relative of timm's.
Needs timm in .venv-bench (scripts/bench_setup); exits 77 (SKIP) naming the reason without.
Usage: agc_timm_oracle.py <agc_driver>
"""
import pathlib
import subprocess
import sys
import tempfile

try:
    import torch
    from timm.utils.agc import adaptive_clip_grad, unitwise_norm
except ImportError as error:
    print(f"SKIP: timm is not importable ({error}); run scripts/bench_setup")
    sys.exit(77)

PARAMS = [("conv.weight", (4, 3, 3, 3)), ("conv.bias", (4,)), ("fc.weight", (5, 7)), ("zero.weight", (3, 4)),
          ("head.weight", (2, 5)), ("head.bias", (2,))]
FACTOR, LR, STEPS, SKIP_AT = 0.05, 0.1, 5, 2
NORMS = {"2": 2.0, "inf": float("inf")}
VARIANTS = {"fp32": {"precision": "fp32", "skip_at": -1}, "fp16": {"precision": "fp16", "skip_at": SKIP_AT}}
TOLERANCE = 1e-6


def raw(path, shape):
    return torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.float32).reshape(shape).clone()


def gradient(shape, g):
    """Uniform noise with a magnitude per output unit between 10^-2.5 and 10^0.5."""
    units = shape[0] if len(shape) > 1 else 1
    magnitude = 10 ** (3 * torch.rand(units, generator=g) - 2.5)
    noise = 2 * torch.rand(shape, generator=g) - 1
    return noise * (magnitude.reshape((-1,) + (1,) * (len(shape) - 1)) if len(shape) > 1 else magnitude)


def data():
    g = torch.Generator().manual_seed(20250714)
    init = [torch.rand(shape, generator=g) - 0.5 for _, shape in PARAMS]
    init[3].zero_()
    clip_grads = [gradient(shape, g) for _, shape in PARAMS]
    grads = [[gradient(shape, g) for _, shape in PARAMS] for _ in range(STEPS)]
    return init, clip_grads, grads


def clipped_units(init, grads, norm_type):
    """(clipped, total) output units, as timm decides: grad_norm >= max_norm."""
    clipped = total = 0
    for w, g in zip(init, grads):
        max_norm = unitwise_norm(w, norm_type).clamp(min=1e-3) * FACTOR
        below = unitwise_norm(g, norm_type) < max_norm
        clipped += int((~below).sum())
        total += below.numel()
    return clipped, total


def timm_clip(init, clip_grads, norm_type):
    params = [w.clone().requires_grad_() for w in init]
    for p, g in zip(params, clip_grads):
        p.grad = g.clone()
    adaptive_clip_grad(params, FACTOR, norm_type=norm_type)
    return [p.grad for p in params]


def timm_steps(init, grads, skip_at):
    params = [w.clone().requires_grad_() for w in init]
    opt = torch.optim.SGD(params, lr=LR, momentum=0.9, foreach=False)
    for t in range(STEPS):
        if t == skip_at:  # the host's scaler finds the infinite gradient and skips the step
            continue
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
        adaptive_clip_grad(params[:-2], FACTOR)  # train.py: model_parameters(model, exclude_head=True)
        opt.step()
    return [p.detach() for p in params]


def relative(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()


def main(driver):
    torch.set_num_threads(1)
    init, clip_grads, grads = data()
    failures, report = [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        spec = [f"param {i} {name} {' '.join(map(str, shape))}" for i, (name, shape) in enumerate(PARAMS)]
        spec += [f"factor {FACTOR!r}", f"lr {LR!r}", f"steps {STEPS}", "ignore head.*", "norms " + " ".join(NORMS)]
        spec += [f"variant label={label} " + " ".join(f"{k}={v}" for k, v in v.items()) for label, v in VARIANTS.items()]
        (directory / "spec.txt").write_text("\n".join(spec) + "\n")
        for i, value in enumerate(init):
            (directory / f"param_{i}.bin").write_bytes(value.numpy().tobytes())
        for i, value in enumerate(clip_grads):
            (directory / f"clip_grad_{i}.bin").write_bytes(value.numpy().tobytes())
        for t, step in enumerate(grads):
            for i, value in enumerate(step):
                (directory / f"grad_{t}_{i}.bin").write_bytes(value.numpy().tobytes())
        subprocess.run([driver, str(directory)], check=True)

        for label, norm_type in NORMS.items():
            clipped, total = clipped_units(init, clip_grads, norm_type)
            if clipped == 0 or clipped == total:
                failures.append(f"clip, norm {label}: {clipped} of {total} units clipped; both kinds are needed")
            expected = timm_clip(init, clip_grads, norm_type)
            worst = 0.0
            for i, (name, shape) in enumerate(PARAMS):
                diff = relative(raw(directory / f"host_clip_{label}_{i}.bin", shape), expected[i])
                worst = max(worst, diff)
                if diff > TOLERANCE:
                    failures.append(f"clip, norm {label}: {name}'s gradient differs from timm's by {diff:.3g}")
            report.append(f"clip norm {label}: {clipped}/{total} units clipped, max {worst:.3g}")

        for label, v in VARIANTS.items():
            expected = timm_steps(init, grads, v["skip_at"])
            worst = 0.0
            for i, (name, shape) in enumerate(PARAMS):
                diff = relative(raw(directory / f"host_{label}_{i}.bin", shape), expected[i])
                worst = max(worst, diff)
                if diff > TOLERANCE:
                    failures.append(f"steps {label}: {name} differs from timm's loop by {diff:.3g} relative")
            report.append(f"{STEPS} SGD steps {label}: max {worst:.3g}")
        clipped, total = zip(*(clipped_units(init, g, 2.0) for g in grads))
        report.append(f"units over the limit of the initial weights per step {list(clipped)} of {total[0]}")
    print(f"agc oracle (factor {FACTOR}, tolerance {TOLERANCE:g} relative): " + "; ".join(report))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
