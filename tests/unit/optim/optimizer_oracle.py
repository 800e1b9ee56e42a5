"""Oracle of optimizer_oracle_test.cpp: torch.optim on the parameters and gradients the C++ test
wrote, with parameter groups resolved here independently (fnmatch, first rule wins, weight decay
on dim >= 2 unless a rule sets it). Usage: optimizer_oracle.py DIR

Reads DIR/spec.txt, DIR/param_<i>.bin and DIR/grad_<t>_<i>.bin (raw float32); writes, per
variant, DIR/groups_<label>.txt ("lr weight_decay name..." per group) and DIR/out_<label>_<i>.bin.
"""
import fnmatch
import pathlib
import sys

import torch


def read(path, shape):
    return torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.float32).reshape(shape).clone()


def write_exchange(directory, steps, resume_at, params, base, variants, rules, init, grads):
    """Writes what timm_optimizer_driver reads (the LAMB, Lion and LARS oracles): DIR/spec.txt (the
    steps, the resume step, the parameters, each variant's options over `base` and the `rules`)
    and the raw float32 DIR/param_<i>.bin and DIR/grad_<t>_<i>.bin. Returns each variant's
    options as strings, as the driver reads them."""
    spec = [f"steps {steps}", f"resume_at {resume_at}"]
    spec += [f"param {i} {name} {' '.join(map(str, shape))}" for i, (name, shape) in enumerate(params)]
    options = {}
    for label, changes in variants.items():
        options[label] = {k: str(v) for k, v in {**base, **changes}.items()}
        spec.append(f"variant {label} " + " ".join(f"{k}={v!r}" for k, v in {**base, **changes}.items()))
        for rule in rules:
            spec += [f"rule {label} {rule['pattern']} {k} {v!r}" for k, v in rule.items() if k != "pattern"]
    (directory / "spec.txt").write_text("\n".join(spec) + "\n")
    for i, value in enumerate(init):
        (directory / f"param_{i}.bin").write_bytes(value.numpy().tobytes())
    for t, step in enumerate(grads):
        for i, value in enumerate(step):
            (directory / f"grad_{t}_{i}.bin").write_bytes(value.numpy().tobytes())
    return options


def parse(directory):
    params, variants, rules, steps = [], {}, {}, 0
    for row in (directory / "spec.txt").read_text().split("\n"):
        row = row.split()
        if not row:
            continue
        if row[0] == "steps":
            steps = int(row[1])
        elif row[0] == "param":
            params.append((row[2], tuple(int(v) for v in row[3:])))
        elif row[0] == "variant":
            variants[row[1]] = dict(kv.split("=", 1) for kv in row[2:])
            rules[row[1]] = []
        elif row[0] == "rule":
            label, pattern, key, value = row[1:]
            for rule in rules[label]:
                if rule["pattern"] == pattern:
                    rule[key] = float(value)
                    break
            else:
                rules[label].append({"pattern": pattern, key: float(value)})
    return params, variants, rules, steps


def groups_for(named, o, rules):
    """The default rule's (decay, no-decay) groups, then each rule's, empty ones left out."""
    slots = [None] * (2 * (len(rules) + 1))
    for name, p in named:
        index = next((i for i, r in enumerate(rules) if fnmatch.fnmatchcase(name, r["pattern"])), -1)
        rule = rules[index] if index >= 0 else {}
        decay = p.dim() >= 2 or "weight_decay" in rule
        slot = 2 * (index + 1) + (0 if decay else 1)
        if slots[slot] is None:
            wd = rule.get("weight_decay", float(o["weight_decay"]) if decay else 0.0)
            slots[slot] = {"params": [], "names": [], "lr": rule.get("lr", float(o["lr"])), "weight_decay": wd}
        slots[slot]["params"].append(p)
        slots[slot]["names"].append(name)
    return [s for s in slots if s is not None]


def make_optimizer(groups, o):
    name, fused = o["name"], o["impl"] == "fused"
    impl = {"fused": True} if fused else {"foreach": False}
    torch_groups = [{"params": g["params"], "lr": g["lr"], "weight_decay": g["weight_decay"]} for g in groups]
    lr, momentum, eps = float(o["lr"]), float(o["momentum"]), float(o["eps"])
    betas = (float(o["beta1"]), float(o["beta2"]))
    if name == "sgd":
        return torch.optim.SGD(torch_groups, lr=lr, momentum=momentum, nesterov=o["nesterov"] == "1", **impl)
    if name in ("adam", "adamw"):
        cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
        return cls(torch_groups, lr=lr, betas=betas, eps=eps, amsgrad=o["amsgrad"] == "1", **impl)
    assert name == "rmsprop" and not fused
    return torch.optim.RMSprop(torch_groups, lr=lr, alpha=float(o["alpha"]), eps=eps, momentum=momentum,
                               centered=o["centered"] == "1", foreach=False)


def main(directory):
    directory = pathlib.Path(directory)
    torch.set_num_threads(1)
    specs, variants, rules, steps = parse(directory)
    init = [read(directory / f"param_{i}.bin", shape) for i, (_, shape) in enumerate(specs)]
    grads = [[read(directory / f"grad_{t}_{i}.bin", shape) for i, (_, shape) in enumerate(specs)]
             for t in range(steps)]
    for label, o in variants.items():
        params = [p.clone().requires_grad_() for p in init]
        groups = groups_for([(name, p) for (name, _), p in zip(specs, params)], o, rules[label])
        with open(directory / f"groups_{label}.txt", "w") as f:
            for g in groups:
                f.write(f"{g['lr']!r} {g['weight_decay']!r} {' '.join(g['names'])}\n")
        opt = make_optimizer(groups, o)
        base_lrs = [g["lr"] for g in opt.param_groups]
        for t in range(steps):
            for group, base in zip(opt.param_groups, base_lrs):
                group["lr"] = base * (1 + 0.1 * t)
                if o["cycle"] == "1":
                    if "betas" in group:
                        group["betas"] = (float(o["beta1"]) - 0.01 * t, float(o["beta2"]))
                    else:
                        group["momentum"] = float(o["momentum"]) - 0.01 * t
            for p, g in zip(params, grads[t]):
                p.grad = g.clone()
            opt.step()
        for i, p in enumerate(params):
            (directory / f"out_{label}_{i}.bin").write_bytes(p.detach().contiguous().numpy().tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
