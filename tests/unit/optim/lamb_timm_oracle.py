"""Oracle of optim.name = "lamb" (docs/optimizers.md, "LAMB"): timm 1.0.31's timm.optim.Lamb
against the host's make_optimizer (timm_optimizer_driver lamb) on the same parameters and gradients, in the manner
of optimizer_oracle_test.cpp (raw float32 files, groups resolved here on their own with fnmatch,
every group's lr changed before each step).

The model: fc.weight (decay), fc.bias (no decay, zero gradients: its update is 0, so with
always_adapt the trust ratio takes timm's 0-norm branch), norm.weight (a rule's weight decay on a
1-D tensor), head.weight (a rule's lr) and zero.weight (all zeros: ||w|| = 0, the other 0-norm
branch). Variants: timm's defaults (its own clip at 1.0 active: the gradients' global norm is
about 4.6), no clip, trust_clip + always_adapt, no bias correction + no grad averaging, beta1
changed every step (as OneCycle does). Each runs 8 steps with the state saved after 3 and loaded
into a new optimizer over new tensors (timm: state_dict() / load_state_dict(); the host: save() /
load()). Both sides must resolve the same groups exactly and give weights within 1e-6 relative
(max |a - b| / max |b| per tensor) of timm's foreach=False (its default on the CPU); timm's
foreach=True (its default on CUDA, bias corrections folded into scalars) is compared too, within
1e-5. Needs timm in .venv-bench (scripts/bench_setup); exits 77 (SKIP) naming the reason without.
Usage: lamb_timm_oracle.py <timm_optimizer_driver>
"""
import copy
import pathlib
import subprocess
import sys
import tempfile

try:
    import torch
    from timm.optim import Lamb
except ImportError as error:
    print(f"SKIP: timm is not importable ({error}); run scripts/bench_setup")
    sys.exit(77)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from optimizer_oracle import groups_for, write_exchange  # noqa: E402  shared with the other oracles
from optimizer_oracle import read as raw  # noqa: E402

STEPS, RESUME_AT = 8, 3
PARAMS = [("fc.weight", (6, 5)), ("fc.bias", (6,)), ("norm.weight", (6,)), ("head.weight", (3, 6)),
          ("zero.weight", (4, 3))]
RULES = [{"pattern": "head.*", "lr": 0.02}, {"pattern": "norm.*", "weight_decay": 0.05}]
BASE = dict(lr=0.01, weight_decay=0.1, beta1=0.9, beta2=0.999, eps=1e-6, bias_correction=1, grad_averaging=1,
            lamb_max_grad_norm=1.0, trust_clip=0, always_adapt=0, cycle=0)
VARIANTS = {
    "timm_defaults": {},
    "no_clip": {"lamb_max_grad_norm": 0.0},
    "trust_clip_always_adapt": {"trust_clip": 1, "always_adapt": 1},
    "no_bias_correction_no_averaging": {"bias_correction": 0, "grad_averaging": 0},
    "beta1_cycled": {"cycle": 1},
}
TOLERANCE, FOREACH_TOLERANCE = 1e-6, 1e-5


def data():
    g = torch.Generator().manual_seed(20250713)
    init = [torch.rand(shape, generator=g) - 0.5 for _, shape in PARAMS]
    init[4].zero_()
    grads = [[2 * torch.rand(shape, generator=g) - 1 for _, shape in PARAMS] for _ in range(STEPS)]
    for step in grads:
        step[1].zero_()
    return init, grads


def timm_run(o, init, grads, foreach):
    def build(values):
        params = [v.clone().requires_grad_() for v in values]
        groups = groups_for([(name, p) for (name, _), p in zip(PARAMS, params)], o, RULES)
        torch_groups = [{"params": g["params"], "lr": g["lr"], "weight_decay": g["weight_decay"]} for g in groups]
        max_norm = float(o["lamb_max_grad_norm"])
        opt = Lamb(torch_groups, lr=float(o["lr"]), betas=(float(o["beta1"]), float(o["beta2"])), eps=float(o["eps"]),
                   weight_decay=float(o["weight_decay"]), bias_correction=o["bias_correction"] == "1",
                   grad_averaging=o["grad_averaging"] == "1", max_grad_norm=max_norm if max_norm > 0 else None,
                   trust_clip=o["trust_clip"] == "1", always_adapt=o["always_adapt"] == "1", foreach=foreach)
        return params, groups, opt

    params, groups, opt = build(init)
    base_lrs = [g["lr"] for g in opt.param_groups]
    for t in range(STEPS):
        if t == RESUME_AT:
            saved = copy.deepcopy(opt.state_dict())
            params, _, opt = build([p.detach() for p in params])
            opt.load_state_dict(saved)
        for group, base in zip(opt.param_groups, base_lrs):
            group["lr"] = base * (1 + 0.1 * t)
            if o["cycle"] == "1":
                group["betas"] = (float(o["beta1"]) - 0.01 * t, float(o["beta2"]))
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
        opt.step()
    return groups, [p.detach() for p in params]


def relative(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()


def main(driver):
    torch.set_num_threads(1)
    init, grads = data()
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads[0]])).item()
    failures, worst, worst_foreach, report = [], 0.0, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        options = write_exchange(directory, STEPS, RESUME_AT, PARAMS, BASE, VARIANTS, RULES, init, grads)
        subprocess.run([driver, "lamb", str(directory)], check=True)

        for label, o in options.items():
            groups, expected = timm_run(o, init, grads, foreach=False)
            _, expected_foreach = timm_run(o, init, grads, foreach=True)
            host_groups = (directory / f"host_groups_{label}.txt").read_text().splitlines()
            timm_groups = [f"{g['lr']:.17g} {g['weight_decay']:.17g} {' '.join(g['names'])}" for g in groups]
            if host_groups != timm_groups:
                failures.append(f"{label}: groups {host_groups} != timm's {timm_groups}")
            variant_worst = variant_foreach = 0.0
            for i, (name, shape) in enumerate(PARAMS):
                host = raw(directory / f"host_{label}_{i}.bin", shape)
                diff, diff_foreach = relative(host, expected[i]), relative(host, expected_foreach[i])
                variant_worst, variant_foreach = max(variant_worst, diff), max(variant_foreach, diff_foreach)
                if diff > TOLERANCE:
                    failures.append(f"{label}: {name} differs from timm's Lamb by {diff:.3g} relative")
                if diff_foreach > FOREACH_TOLERANCE:
                    failures.append(f"{label}: {name} differs from timm's foreach Lamb by {diff_foreach:.3g} relative")
            if torch.equal(expected[0], init[0]) or torch.equal(expected[4], init[4]):
                failures.append(f"{label}: timm left fc.weight or zero.weight unchanged: the comparison is vacuous")
            if not torch.equal(expected[1], init[1]):
                failures.append(f"{label}: fc.bias (no decay, zero gradients) moved in timm")
            worst, worst_foreach = max(worst, variant_worst), max(worst_foreach, variant_foreach)
            report.append(f"{label}={variant_worst:.2g}/{variant_foreach:.2g}")
    print(f"lamb oracle: {len(VARIANTS)} variants x {STEPS} steps, resumed after {RESUME_AT}; first step's gradient "
          f"norm {norm:.3g}; largest relative weight difference vs timm foreach=False {worst:.3g} (tolerance "
          f"{TOLERANCE:g}), vs foreach=True {worst_foreach:.3g} ({FOREACH_TOLERANCE:g}); " + " ".join(report))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
