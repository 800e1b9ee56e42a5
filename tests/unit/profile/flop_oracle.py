"""FLOP oracle for tests/unit/profile: torch.utils.flop_counter.FlopCounterMode on the same ops
and architectures the C++ tests run (shapes matter, values do not).

usage: flop_oracle.py CASE   with CASE one of ops, mlp, small_cnn, deep_cnn, sdpa_formula
prints one JSON object: {"total": flops, "by_op": {"aten.convolution": flops, ...}}
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count


def ops():
    # Keep in step with run_ops() in flop_counter_test.cpp.
    r = torch.rand
    w = r(30, 20)
    F.linear(r(8, 20), w, r(30))
    F.linear(r(4, 6, 20), w, r(30))
    F.linear(r(4, 6, 20), w)
    torch.matmul(r(2, 5, 7), r(2, 7, 3))
    torch.matmul(r(3, 5, 7), r(7, 2))
    torch.mm(r(5, 7), r(7, 4))
    torch.addmm(r(5, 4), r(5, 7), r(7, 4))
    torch.bmm(r(2, 5, 7), r(2, 7, 3))
    torch.baddbmm(r(2, 5, 3), r(2, 5, 7), r(2, 7, 3))
    torch.einsum("bij,bjk->bik", r(2, 3, 4), r(2, 4, 5))
    F.conv2d(r(2, 4, 9, 9), r(6, 2, 3, 3), r(6), stride=2, padding=1, groups=2)
    F.conv2d(r(2, 4, 9, 9), r(5, 4, 3, 3), None, padding=2, dilation=2)
    F.conv1d(r(2, 3, 10), r(5, 3, 3))
    F.conv3d(r(1, 2, 5, 6, 7), r(3, 2, 2, 3, 3), stride=(1, 2, 1))
    F.conv_transpose2d(r(2, 4, 5, 5), r(4, 3, 3, 3), r(3), stride=2, padding=1, output_padding=1)
    F.conv_transpose2d(r(2, 4, 5, 5), r(4, 3, 3, 3), None, stride=2, groups=2)
    F.relu(r(10)).sum()


def mlp():
    x = torch.rand(4, 3, 32, 32).flatten(1)
    net = nn.Sequential(nn.Linear(3072, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 3))
    net(x)


def small_cnn():
    layers = []
    for cin, cout in [(3, 32), (32, 64), (64, 64)]:
        layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    trunk = nn.Sequential(*layers).eval()
    nn.Linear(64, 3)(trunk(torch.rand(4, 3, 32, 32)).amax((2, 3)))


def deep_cnn():
    h = torch.rand(4, 3, 32, 32)
    convs = [nn.Conv2d(3, 32, 3, padding=1, bias=False)] + [nn.Conv2d(32, 32, 3, padding=1, bias=False) for _ in range(8)]
    for conv in convs:
        h = F.relu(conv(h))
    nn.Linear(32, 3)(h.amax((2, 3)))


CASES = {"ops": ops, "mlp": mlp, "small_cnn": small_cnn, "deep_cnn": deep_cnn}

if __name__ == "__main__":
    case = sys.argv[1]
    if case == "sdpa_formula":
        # FlopCounterMode counts 0 for scaled_dot_product_attention on the CPU (its fused CPU
        # kernel is not in its table); its own formula gives what it counts on CUDA.
        total = sdpa_flop_count((2, 4, 16, 8), (2, 4, 16, 8), (2, 4, 16, 6))
        print(json.dumps({"total": total, "by_op": {}}))
        sys.exit(0)
    with torch.no_grad(), FlopCounterMode(display=False) as mode:
        CASES[case]()
    by_op = {str(op): n for op, n in mode.get_flop_counts()["Global"].items()}
    print(json.dumps({"total": mode.get_total_flops(), "by_op": by_op}))
