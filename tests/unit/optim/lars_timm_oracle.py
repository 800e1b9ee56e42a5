"""Oracle of optim.name = "lars" (docs/optimizers.md, "LARS"): timm 1.0.31's timm.optim.Lars
against the host's make_optimizer (timm_optimizer_driver lars) on the same parameters and gradients, as
lamb_timm_oracle.py does for LAMB (raw float32 files, groups resolved here on their own with
fnmatch, every group's lr changed before each step).

The model: fc.weight (decay: adapted), fc.bias (the default rule's weight-decay-free group: timm
and the host adapt it only with always_adapt, else a plain momentum step), norm.weight (a rule's
weight decay on a 1-D tensor: adapted), head.weight (a rule's lr) and zero.weight (all zeros:
||w|| = 0, the trust ratio's 1 branch). Variants: momentum 0.9 with decay 0.1 (the SimCLR/BYOL
form), Nesterov, dampening 0.5, no momentum (no state), no decay (only the norm rule adapts),
always_adapt, LARC (trust_clip) with the clamp idle and with trust_coeff 1.0 where min(ratio / lr,
1) clamps, and momentum changed every step (as OneCycle does). Each runs 8 steps with the state
saved after 3 and loaded into a new optimizer over new tensors (timm: state_dict() /
load_state_dict(); the host: save() / load()), so the momentum buffer's round trip is in every
variant with momentum. Both sides must resolve the same groups exactly and give weights whose
difference, relative to how far timm moved each tensor (max |host - timm| / max |timm - start|),
is within 1e-6 of timm's foreach=False (its default on the CPU) and of foreach=True (its default
on CUDA). Needs timm in .venv-bench (scripts/bench_setup); exits 77 (SKIP) naming the reason
without. Usage: lars_timm_oracle.py <timm_optimizer_driver>
"""
import copy
import pathlib
import subprocess
import sys
import tempfile

try:
    import torch
    from timm.optim import Lars
except ImportError as error:
    print(f"SKIP: timm is not importable ({error}); run scripts/bench_setup")
    sys.exit(77)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from optimizer_oracle import groups_for, write_exchange  # noqa: E402  shared with the other oracles
from optimizer_oracle import read as raw  # noqa: E402

STEPS, RESUME_AT = 8, 3
PARAMS = [("fc.weight", (6, 5)), ("fc.bias", (6,)), ("norm.weight", (6,)), ("head.weight", (3, 6)),
          ("zero.weight", (4, 3))]
RULES = [{"pattern": "head.*", "lr": 0.2}, {"pattern": "norm.*", "weight_decay": 0.05}]
BASE = dict(lr=0.1, weight_decay=0.1, momentum=0.9, dampening=0.0, nesterov=0, trust_coeff=0.001, eps=1e-8,
            trust_clip=0, always_adapt=0, cycle=0)
VARIANTS = {
    "ssl": {},
    "nesterov": {"nesterov": 1},
    "dampening": {"dampening": 0.5},
    "no_momentum": {"momentum": 0.0},
    "no_decay": {"weight_decay": 0.0},
    "always_adapt": {"always_adapt": 1},
    "larc": {"trust_clip": 1},
    "larc_clamped": {"trust_clip": 1, "trust_coeff": 1.0},
    "momentum_cycled": {"cycle": 1},
}
TOLERANCE, FOREACH_TOLERANCE = 1e-6, 1e-6


def data():
    g = torch.Generator().manual_seed(20250713)
    init = [torch.rand(shape, generator=g) - 0.5 for _, shape in PARAMS]
    init[4].zero_()
    grads = [[2 * torch.rand(shape, generator=g) - 1 for _, shape in PARAMS] for _ in range(STEPS)]
    return init, grads


def timm_run(o, init, grads, foreach):
    def build(values):
        params = [v.clone().requires_grad_() for v in values]
        groups = groups_for([(name, p) for (name, _), p in zip(PARAMS, params)], o, RULES)
        torch_groups = [{"params": g["params"], "lr": g["lr"], "weight_decay": g["weight_decay"]} for g in groups]
        opt = Lars(torch_groups, lr=float(o["lr"]), momentum=float(o["momentum"]), dampening=float(o["dampening"]),
                   weight_decay=float(o["weight_decay"]), nesterov=o["nesterov"] == "1",
                   trust_coeff=float(o["trust_coeff"]), eps=float(o["eps"]), trust_clip=o["trust_clip"] == "1",
                   always_adapt=o["always_adapt"] == "1", foreach=foreach)
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
                group["momentum"] = float(o["momentum"]) - 0.01 * t
        for p, g in zip(params, grads[t]):
            p.grad = g.clone()
        opt.step()
    return groups, [p.detach() for p in params]


def moved_relative(host, expected, start):
    """max |host - timm| over how far timm moved the tensor (max |timm - start|)."""
    return ((host - expected).abs().max() / (expected - start).abs().max().clamp_min(1e-12)).item()


def main(driver):
    torch.set_num_threads(1)
    init, grads = data()
    failures, worst, worst_foreach, report = [], 0.0, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        options = write_exchange(directory, STEPS, RESUME_AT, PARAMS, BASE, VARIANTS, RULES, init, grads)
        subprocess.run([driver, "lars", str(directory)], check=True)

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
                if torch.equal(expected[i], init[i]):
                    failures.append(f"{label}: timm left {name} unchanged: the comparison is vacuous")
                    continue
                diff = moved_relative(host, expected[i], init[i])
                diff_foreach = moved_relative(host, expected_foreach[i], init[i])
                variant_worst, variant_foreach = max(variant_worst, diff), max(variant_foreach, diff_foreach)
                if diff > TOLERANCE:
                    failures.append(f"{label}: {name} differs from timm's Lars by {diff:.3g} of its move")
                if diff_foreach > FOREACH_TOLERANCE:
                    failures.append(f"{label}: {name} differs from timm's foreach Lars by {diff_foreach:.3g} of its move")
            worst, worst_foreach = max(worst, variant_worst), max(worst_foreach, variant_foreach)
            report.append(f"{label}={variant_worst:.2g}/{variant_foreach:.2g}")
        # The exclusion is timm's: without always_adapt the decay-free fc.bias takes the plain
        # momentum step, so adapting it would have moved it otherwise.
        _, plain = timm_run(options["ssl"], init, grads, foreach=False)
        _, adapted = timm_run(options["always_adapt"], init, grads, foreach=False)
        if torch.equal(plain[1], adapted[1]):
            failures.append("fc.bias moved alike with and without always_adapt: the exclusion is not exercised")
    print(f"lars oracle: {len(VARIANTS)} variants x {STEPS} steps, resumed after {RESUME_AT}; largest weight "
          f"difference relative to timm's move, vs foreach=False {worst:.3g} (tolerance {TOLERANCE:g}), vs "
          f"foreach=True {worst_foreach:.3g} ({FOREACH_TOLERANCE:g}); " + " ".join(report))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
