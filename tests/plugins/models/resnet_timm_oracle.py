"""timm oracle for org.torchhost.resnet's drop_path_rate (timm 1.0.31's stochastic depth).

timm imports only in .venv-bench (torch 2.14.1), not beside the project venv's torch, so this
script runs there (run_bench_oracle.sh exits 77, SKIP, without it) and hands its results to the
C++ suite "timm_drop_path_oracle" of zoo_tests (resnet_timm_oracle_test.cpp) as files.

  resnet_timm_oracle.py check TEST_BINARY
      Writes the fixtures below to a temporary directory and runs that suite (skipped in the
      binary's plain run) on them; exits with its status.
  resnet_timm_oracle.py fixtures DIR
      Only writes the fixtures (for debugging).

Fixtures (plain dicts saved with torch.save: torch::pickle_load reads those, not an OrderedDict):
  rates.txt          "<depth> <drop_path_rate> <rate of block 0> <rate of block 1> ..." for timm's
                     resnet18/34/50 at each rate of RATES: each block's DropPath.drop_prob in
                     order (0 where timm builds none), repr (exact) floats
  <case>_weights.pt  timm's state_dict (torchvision's names), BatchNorm weights and statistics
                     randomised, so every parameter and statistic shapes the logits
  <case>_io.pt       "x" [8, 3, 32, 32], "labels"; "eval": eval-mode logits (no_grad); "train":
                     training-mode logits with DropPath at DROP_PATH_RATE after
                     torch.manual_seed(MASK_SEED), "grad.<name>": each parameter's gradient of
                     cross_entropy(train logits, labels), "after.<name>": each buffer after that
                     step; "dropped": per DropPath block, how many of the 8 samples its mask
                     zeroed (the seeded masks the C++ side must draw alike)
Cases: resnet18 and resnet50 in float32; resnet18_bf16: resnet18 under CPU bfloat16 autocast.
"""
import os
import subprocess
import sys
import tempfile

import timm
import torch
import torch.nn.functional as F
from timm.layers import DropPath

RATES = [0.05, 0.3]
DROP_PATH_RATE = 0.5
MASK_SEED = 7  # resnet_timm_oracle_test.cpp's kMaskSeed
# name, depth, construction seed, bfloat16 autocast
CASES = [("resnet18", 18, 18, False), ("resnet50", 50, 50, False), ("resnet18_bf16", 18, 19, True)]


def drop_rates(model):
    rates = []
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in stage:
            rates.append(block.drop_path.drop_prob if block.drop_path is not None else 0.0)
    return rates


def write_rates(directory):
    lines = []
    for depth in (18, 34, 50):
        for rate in RATES:
            model = timm.create_model(f"resnet{depth}", drop_path_rate=rate, num_classes=10)
            lines.append(" ".join([str(depth), repr(rate)] + [repr(r) for r in drop_rates(model)]))
    with open(os.path.join(directory, "rates.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_case(directory, name, depth, seed, bf16):
    torch.manual_seed(seed)
    model = timm.create_model(f"resnet{depth}", drop_path_rate=DROP_PATH_RATE, num_classes=10)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)
    torch.save(dict(model.state_dict()), os.path.join(directory, f"{name}_weights.pt"))
    x = torch.randn(8, 3, 32, 32)
    labels = torch.randint(0, 10, (8,))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = {"x": x, "labels": labels, "eval": model.eval()(x).float()}

    dropped = []

    def count(module, inputs, output):
        # A dropped sample's branch is exactly zero after the mask (BatchNorm output times 0).
        dropped.append(int((output.flatten(1) == 0).all(dim=1).sum()))

    for m in model.modules():
        if isinstance(m, DropPath):
            m.register_forward_hook(count)
    model.train()
    torch.manual_seed(MASK_SEED)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(x)
    F.cross_entropy(logits.float(), labels).backward()
    out["train"] = logits.detach().float()
    out.update({"grad." + k: p.grad.clone() for k, p in model.named_parameters()})
    out.update({"after." + k: b.clone() for k, b in model.named_buffers()})
    out["dropped"] = torch.tensor(dropped)
    torch.save(out, os.path.join(directory, f"{name}_io.pt"))
    print(f"{name}: samples dropped per DropPath block {dropped}")


def fixtures(directory):
    write_rates(directory)
    for case in CASES:
        write_case(directory, *case)


def check(binary):
    with tempfile.TemporaryDirectory() as directory:
        fixtures(directory)
        env = dict(os.environ, TP_RESNET_TIMM_FIXTURES=directory)
        return subprocess.run([binary, "--no-skip", "--test-suite=timm_drop_path_oracle"], env=env).returncode


if __name__ == "__main__":
    torch.set_num_threads(2)
    if sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    elif sys.argv[1] == "fixtures":
        os.makedirs(sys.argv[2], exist_ok=True)
        fixtures(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} check TEST_BINARY | fixtures DIR")
