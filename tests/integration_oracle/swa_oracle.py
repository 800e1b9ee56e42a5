"""The [swa] oracle (weight_average_test.cpp): PyTorch's own SWALR, AveragedModel and update_bn
against a host run of swa.toml (4 epochs x 8 steps, SWA from epoch 2, torchscript_oracle.py's Mlp).

usage: swa_oracle.py RUN_DIR OPTIM_LR SWA_LR ANNEAL_EPOCHS STRATEGY START_EPOCH

Prints
  lr <max relative difference> <steps compared>    every step's lr of the averaged epochs (the
      lr the step trained with, history.jsonl) against SWALR stepped once per epoch from OPTIM_LR
  average <max relative difference> <updates>      the host's "swa" entry after epoch 3 against
      AveragedModel(get_swa_multi_avg_fn) fed the live weights at the ends of epochs 2 and 3
  update_bn <max relative difference> <tracked>    the final model's BatchNorm statistics against
      torch.optim.swa_utils.update_bn over the training split (batches of 32 in file order)
"""
import glob
import json
import os
import pathlib
import sys

import torch
from torch import nn
from torch.optim.swa_utils import SWALR, AveragedModel, get_swa_multi_avg_fn, update_bn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "plugins" / "models"))
from trajectory_oracle import c_regression  # noqa: E402
from torchscript_oracle import Mlp  # noqa: E402

SIZE, BATCH, STEPS_PER_EPOCH = 256, 32, 8


def rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def main():
    run_dir = sys.argv[1]
    optim_lr, swa_lr, anneal, strategy, start = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])

    # 1. SWALR, stepped after every averaged epoch (PyTorch's SWA recipe).
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "history.jsonl"))]
    steps = [r for r in rows if r.get("kind") == "step"]
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)  # SWALR stepped without optimizer.step()
    probe = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([probe], lr=optim_lr)
    sched = SWALR(opt, swa_lr=swa_lr, anneal_epochs=anneal, anneal_strategy=strategy)
    worst, compared = 0.0, 0
    epochs = sorted({int(r["epoch"]) for r in steps})
    for epoch in epochs:
        if epoch + 1 < start:
            continue
        expected = opt.param_groups[0]["lr"]
        for r in steps:
            if int(r["epoch"]) == epoch:
                worst = max(worst, abs(r["lr"] - expected) / expected)
                compared += 1
        sched.step()
    print(f"lr {worst:.3e} {compared}")

    # 2. The equal average of the live weights at the ends of the averaged epochs.
    def checkpoint(step):
        return torch.load(os.path.join(run_dir, "checkpoints", f"step-{step:08d}.pt"), weights_only=True)

    model = Mlp()
    average = AveragedModel(model, multi_avg_fn=get_swa_multi_avg_fn())
    for epoch in range(start, 4):  # epochs 2 and 3 (1-based); epoch 4's file holds the final model
        model.load_state_dict(checkpoint(epoch * STEPS_PER_EPOCH)["model"])
        average.update_parameters(model)
    host = checkpoint(3 * STEPS_PER_EPOCH)
    assert host["swa_updates"] == int(average.n_averaged), (host["swa_updates"], int(average.n_averaged))
    expected = dict(average.module.named_parameters())
    print(f"average {max(rel(host['swa'][n], p) for n, p in expected.items()):.3e} {int(average.n_averaged)}")

    # 3. update_bn on the final weights.
    final = torch.load(os.path.join(run_dir, "checkpoints", "last.pt"), weights_only=True)["model"]
    model = Mlp()
    model.load_state_dict(final)
    x, _ = c_regression("train", SIZE)
    update_bn([x[i:i + BATCH] for i in range(0, SIZE, BATCH)], model)
    diff = max(rel(final["bn.running_mean"], model.bn.running_mean), rel(final["bn.running_var"], model.bn.running_var))
    print(f"update_bn {diff:.3e} {int(final['bn.num_batches_tracked'])}")


if __name__ == "__main__":
    main()
