"""Oracle of optim.name = "lion" (docs/optimizers.md, "Lion"): timm 1.0.31's timm.optim.Lion
against the host's make_optimizer (timm_optimizer_driver lion) on the same parameters and gradients, as
lamb_timm_oracle.py does for LAMB (raw float32 files, groups resolved here on their own with
fnmatch, every group's lr changed before each step).

The model: fc.weight (decay), fc.bias (no decay, zero gradients: sign(0) = 0, so it must not
move, cautious or not), norm.weight (a rule's weight decay on a 1-D tensor), head.weight (a rule's
lr) and zero.weight (all zeros: decay has nothing to shrink). Variants: timm's betas (0.9, 0.99)
with decay, no decay anywhere, caution (timm's clion), the adam betas (0.9, 0.999) the host's
optim.betas defaults to, beta1 changed every step (as OneCycle does), and betas (0.99, 0.5) with
caution, where the momentum outweighs each new gradient (so the state's round trip shows). Each runs 8 steps with the
state saved after 3 and loaded into a new optimizer over new tensors (timm: state_dict() /
load_state_dict(); the host: save() / load()). Both sides must resolve the same groups exactly
and give weights within 1e-6 relative (max |a - b| / max |b| per tensor) of timm's foreach=False
(its default on the CPU) and of foreach=True (its default on CUDA, the same arithmetic per
element). Needs timm in .venv-bench (scripts/bench_setup); exits 77 (SKIP) naming the reason
without. Usage: lion_timm_oracle.py <timm_optimizer_driver>
"""
import copy
import pathlib
import subprocess
import sys
import tempfile

try:
    import torch
    from timm.optim import Lion
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
BASE = dict(lr=0.01, weight_decay=0.1, beta1=0.9, beta2=0.99, caution=0, cycle=0)
VARIANTS = {
    "timm_betas": {},
    "no_decay": {"weight_decay": 0.0},
    "caution": {"caution": 1},
    "adam_betas": {"beta2": 0.999},
    "beta1_cycled": {"cycle": 1},
    "momentum_led": {"beta1": 0.99, "beta2": 0.5, "caution": 1},
}
TOLERANCE, FOREACH_TOLERANCE = 1e-6, 1e-6


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
        opt = Lion(torch_groups, lr=float(o["lr"]), betas=(float(o["beta1"]), float(o["beta2"])),
                   weight_decay=float(o["weight_decay"]), caution=o["caution"] == "1", foreach=foreach)
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
    failures, worst, worst_foreach, report = [], 0.0, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        options = write_exchange(directory, STEPS, RESUME_AT, PARAMS, BASE, VARIANTS, RULES, init, grads)
        subprocess.run([driver, "lion", str(directory)], check=True)

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
                    failures.append(f"{label}: {name} differs from timm's Lion by {diff:.3g} relative")
                if diff_foreach > FOREACH_TOLERANCE:
                    failures.append(f"{label}: {name} differs from timm's foreach Lion by {diff_foreach:.3g} relative")
            if torch.equal(expected[0], init[0]) or torch.equal(expected[3], init[3]):
                failures.append(f"{label}: timm left fc.weight or head.weight unchanged: the comparison is vacuous")
            if not torch.equal(expected[1], init[1]):
                failures.append(f"{label}: fc.bias (no decay, zero gradients) moved in timm")
            worst, worst_foreach = max(worst, variant_worst), max(worst_foreach, variant_foreach)
            report.append(f"{label}={variant_worst:.2g}/{variant_foreach:.2g}")
    print(f"lion oracle: {len(VARIANTS)} variants x {STEPS} steps, resumed after {RESUME_AT}; largest relative "
          f"weight difference vs timm foreach=False {worst:.3g} (tolerance {TOLERANCE:g}), vs foreach=True "
          f"{worst_foreach:.3g} ({FOREACH_TOLERANCE:g}); " + " ".join(report))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
