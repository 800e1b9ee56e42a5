"""The history's lr (lr_history_test.cpp): every step record's "lr" is the lr that step trained
with, PyTorch's OneCycleLR.get_last_lr() read before scheduler.step().

usage: lr_history_oracle.py RUN_DIR MAX_LR TOTAL_STEPS
Prints "lr <max relative difference> <steps compared>".
"""
import json
import os
import sys

import torch


def main():
    run_dir, max_lr, total = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    probe = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([probe], lr=max_lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=total)
    used = []
    for _ in range(total):
        used.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "history.jsonl"))]
    steps = [r for r in rows if r.get("kind") == "step"]
    worst = max(abs(r["lr"] - used[int(r["step"]) - 1]) / used[int(r["step"]) - 1] for r in steps)
    print(f"lr {worst:.3e} {len(steps)}")


if __name__ == "__main__":
    main()
