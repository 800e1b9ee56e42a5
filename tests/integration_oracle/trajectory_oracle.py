"""Python side of trajectory_oracle_test.cpp.

  trajectory_oracle.py init DIR      builds the MLP the host builds (org.torchhost.mlp with
                                     in_features 4, hidden [16], num_classes 1), seeds it and
                                     saves its state_dict to DIR/init.pt (train.init_weights)
  trajectory_oracle.py compare DIR   trains the same model from DIR/init.pt with a plain PyTorch
                                     loop and compares with the host runs in DIR/<run>/: the
                                     per-step loss of history.jsonl and the weights of
                                     checkpoints/last.pt. Prints "diff <run> <reference> loss|weights
                                     <max relative difference>", "steps <run> <n>" and
                                     "clipped <optimizer> <steps clipped> <steps>".
  trajectory_oracle.py scheduled DIR the host's fused runs DIR/<optimizer>_<cosine|cosine_bf16>/
                                     (SCHEDULED_EPOCHS, a cosine schedule) against torch.optim's
                                     fused=True, the lr of every step set from the host's history
                                     (lr_history_test checks those values against torch's own
                                     schedulers), bf16 under torch.autocast like the host's forward and
                                     loss. Prints "diff", "steps" and "lrs <run> <distinct lrs>".

The dataset is plugins/template/tier_s_c_dataset/c_dataset.c (org.torchhost.test.c_regression),
reimplemented bit for bit: splitmix64 hashes of (split, index) give x, float32 arithmetic gives y.
Keep EPOCHS, BATCH, SIZE, MAX_NORM and OPTIMIZERS in step with trajectory.toml and the test.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import torch.nn.functional as F

SIZE, BATCH, EPOCHS, MAX_NORM = 256, 32, 3, 0.5
OPTIMIZERS = {
    "sgd": {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
    "adamw": {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1},
}
# The scheduled comparison's optimizers (trajectory_oracle_test.cpp's kScheduledOptimizers repeats
# them) and length: 7 epochs of 8 steps.
SCHEDULED = {
    "sgd": (torch.optim.SGD, OPTIMIZERS["sgd"]),
    "sgd_nesterov": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    "adam": (torch.optim.Adam, {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}),
    "adamw": (torch.optim.AdamW, OPTIMIZERS["adamw"]),
}
SCHEDULED_EPOCHS = 7
MASK = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def hash_string(text):
    h = 0xCBF29CE484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK
    return h


def c_regression(split, size):
    """x [size, 4] and y [size, 1] exactly as c_get_sample computes them (float32, no FMA)."""
    weight = np.array([0.5, -1.25, 2.0, 0.75], dtype=np.float32)
    split_key = mix64(hash_string(split))
    xs = np.zeros((size, 4), dtype=np.float32)
    ys = np.zeros((size, 1), dtype=np.float32)
    for index in range(size):
        key = mix64(split_key ^ mix64(index))
        dot = np.float32(0.1)
        for j in range(4):
            bits = mix64((key + j) & MASK) >> 40
            xs[index, j] = np.float32(bits) / np.float32(8388608.0) - np.float32(1.0)
            dot = np.float32(dot + weight[j] * xs[index, j])
        ys[index, 0] = dot
    return torch.from_numpy(xs), torch.from_numpy(ys)


class Mlp(torch.nn.Module):
    """org.torchhost.mlp with hidden [16]: fc1 -> ReLU -> head, the host's parameter names."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 16)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.relu(self.fc1(x)))


def train(name, init, x, y, fused):
    """The reference loop: the mean loss over each batch of 32, clip, step. Returns the per-step
    losses, the final state_dict and the pre-clip gradient norms."""
    model = Mlp()
    model.load_state_dict(init)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    o = dict(OPTIMIZERS[name])
    groups = [{"params": decay, "weight_decay": o.pop("weight_decay")}, {"params": no_decay, "weight_decay": 0.0}]
    impl = {"fused": True} if fused else {"foreach": False}
    cls = torch.optim.SGD if name == "sgd" else torch.optim.AdamW
    opt = cls(groups, **o, **impl)
    losses, norms = [], []
    for _ in range(EPOCHS):
        for start in range(0, SIZE - BATCH + 1, BATCH):
            loss = F.mse_loss(model(x[start:start + BATCH]), y[start:start + BATCH])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM).item())
            opt.step()
            losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}, norms


def train_scheduled(name, init, x, y, lrs, bf16):
    """torch.optim's fused step with the lr of every step given (the host's), the loss over each
    batch of 32 under bf16 autocast when `bf16`, clipped as the host clips."""
    model = Mlp()
    model.load_state_dict(init)
    cls, settings = SCHEDULED[name]
    o = dict(settings)
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": o.pop("weight_decay")},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    opt = cls(groups, **o, fused=True)
    losses, step = [], 0
    for _ in range(SCHEDULED_EPOCHS):
        for start in range(0, SIZE - BATCH + 1, BATCH):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.mse_loss(model(x[start:start + BATCH]), y[start:start + BATCH])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            for group in opt.param_groups:
                group["lr"] = lrs[step]
            opt.step()
            losses.append(loss.item())
            step += 1
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def host_lrs(directory):
    return [json.loads(line)["lr"] for line in (directory / "history.jsonl").read_text().splitlines()
            if json.loads(line)["kind"] == "step"]


def host_run(directory):
    losses, norms, clipped = [], [], []
    for line in (directory / "history.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "step":
            losses.append(record["train/loss"])
            norms.append(record["train/grad_norm"])
            clipped.append(record["train/clipped_fraction"])
    model = torch.load(directory / "checkpoints" / "last.pt", weights_only=True)["model"]
    return losses, model, norms, clipped


def loss_diff(a, b):
    if len(a) != len(b):
        return float("inf")
    return max(abs(p - q) / abs(q) for p, q in zip(a, b))


def weight_diff(a, b):
    if sorted(a) != sorted(b):
        return float("inf")
    return max(((a[k] - b[k]).abs().max() / b[k].abs().max()).item() for k in b)


def main(mode, directory):
    directory = pathlib.Path(directory)
    torch.set_num_threads(1)
    if mode == "init":
        torch.manual_seed(1234)
        torch.save(Mlp().state_dict(), directory / "init.pt")
        return
    init = torch.load(directory / "init.pt", weights_only=True)
    x, y = c_regression("train", SIZE)
    if mode == "scheduled":
        for name in SCHEDULED:
            for run in ("cosine", "cosine_bf16"):
                label = f"{name}_{run}"
                losses, weights, _, _ = host_run(directory / label)
                lrs = host_lrs(directory / label)
                print("steps", label, len(losses))
                print("lrs", label, len(set(lrs)))
                ref_losses, ref_weights = train_scheduled(name, init, x, y, lrs, run.endswith("bf16"))
                print("diff", label, "python_fused", "loss", repr(loss_diff(losses, ref_losses)))
                print("diff", label, "python_fused", "weights", repr(weight_diff(weights, ref_weights)))
        return
    for name in OPTIMIZERS:
        reference = {}
        for fused in (False, True):
            losses, weights, norms = train(name, init, x, y, fused)
            reference["python_fused" if fused else "python"] = (losses, weights)
        print("clipped", name, sum(n > MAX_NORM for n in norms), len(norms))
        runs = {run: host_run(directory / f"{name}_{run}") for run in ("a", "b", "fused")}
        for run, (losses, _, host_norms, host_clipped) in runs.items():
            print("steps", f"{name}_{run}", len(losses))
            # train/grad_norm (before clipping) and train/clipped_fraction of every logged step.
            print("diff", f"{name}_{run}", "python", "grad_norm", repr(loss_diff(host_norms, norms)))
            expected = [1.0 if n > MAX_NORM else 0.0 for n in norms]
            worst = max(abs(p - q) for p, q in zip(host_clipped, expected)) if len(host_clipped) == len(expected) else 1.0
            print("diff", f"{name}_{run}", "python", "clipped_fraction", repr(worst))
        pairs = [("a", "python"), ("b", "python"), ("b", "a"), ("fused", "a"), ("fused", "python_fused")]
        for run, ref in pairs:
            theirs = runs[ref] if ref in runs else reference[ref]
            print("diff", f"{name}_{run}", ref, "loss", repr(loss_diff(runs[run][0], theirs[0])))
            print("diff", f"{name}_{run}", ref, "weights", repr(weight_diff(runs[run][1], theirs[1])))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
