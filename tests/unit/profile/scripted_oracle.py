"""Writes a TorchScript module with convolutions (grouped, strided, transposed), linear, matmul,
bmm, einsum and functional ops to PATH, and prints FlopCounterMode's count of its forward on a
[4, 3, 16, 16] input as JSON ({"total": ..., "by_op": {...}}).

usage: scripted_oracle.py PATH
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.grouped = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=4, bias=False)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.key = nn.Parameter(torch.randn(4, 6))
        self.proj = nn.Linear(16, 10)
        self.head = nn.Linear(10, 3)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv(image))                     # [B, 8, 16, 16]
        h = F.gelu(self.grouped(h))                       # [B, 8, 8, 8]
        h = self.up(h)                                    # [B, 4, 16, 16]
        tokens = h.flatten(2).transpose(1, 2)             # [B, 256, 4]
        scores = torch.matmul(tokens, self.key)           # [B, 256, 6]
        mixed = torch.bmm(scores.transpose(1, 2), tokens) # [B, 6, 4]
        mixed = torch.einsum("bij,bjk->bik", mixed, mixed.transpose(1, 2))  # [B, 6, 6]
        pooled = F.adaptive_avg_pool2d(h, 2).flatten(1)   # [B, 16]
        z = F.linear(pooled, self.proj.weight, self.proj.bias) + mixed.mean()
        return self.head(torch.tanh(z))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Mixed().eval()
    torch.jit.script(model).save(sys.argv[1])
    with torch.no_grad(), FlopCounterMode(display=False) as mode:
        model(torch.rand(4, 3, 16, 16))
    by_op = {str(op): n for op, n in mode.get_flop_counts()["Global"].items()}
    print(json.dumps({"total": mode.get_total_flops(), "by_op": by_op}))
