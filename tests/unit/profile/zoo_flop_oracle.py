"""Prints the FlopCounterMode figures zoo_profile_test.cpp commits, from torchvision itself.

Run with .venv-bench's Python (torch 2.14.1, torchvision 0.29.1): .venv-bench/bin/python
tests/unit/profile/zoo_flop_oracle.py. Batch 1 at 224x224, FLOPs (= 2 x MACs). ViT runs in train
mode under no_grad (dropout is 0): eval mode takes nn.MultiheadAttention's fused fast path, whose
projections FlopCounterMode does not see; and on the CPU no attention kernel has a FLOP formula,
so the attention is added with FlopCounterMode's own sdpa_flop_count.
"""
import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

CASES = [("efficientnet_b0", False), ("mobilenet_v3_large", False), ("mobilenet_v3_small", False),
         ("convnext_tiny", False), ("vit_b_16", True)]

for name, is_vit in CASES:
    model = getattr(torchvision.models, name)()
    model.train(is_vit)
    x = torch.rand(1, 3, 224, 224)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    flops = counter.get_total_flops()
    if is_vit:
        tokens, heads, head_dim = 197, 12, 64
        shape = (1, heads, tokens, head_dim)
        flops += len(model.encoder.layers) * sdpa_flop_count(shape, shape, shape)
    print(f"{name}: {flops} FLOPs = {flops / 2e9:.6f} GMACs, {sum(p.numel() for p in model.parameters())} parameters")
