"""torchvision oracle for convnext.so and vit.so (org.torchhost.convnext, org.torchhost.vit).

torchvision 0.29 imports only in .venv-bench (torch 2.14.1), not beside the project venv's torch,
so this script runs there (run_bench_oracle.sh exits 77, SKIP, without it) and hands its results
to the C++ tests as files.

  torchvision_oracle.py table FILE
      Rewrites the committed table (torchvision_state.txt) that zoo_convnext_vit_tests checks on
      every run without Python: for every variant at num_classes 1000 (ViT at image_size 224),
      each state_dict entry in order, its shape and whether it is a parameter, the parameter
      count, and each ConvNeXt block's stochastic-depth rate.
  torchvision_oracle.py check TEST_BINARY
      Writes the fixtures below to a temporary directory and runs the oracle cases of TEST_BINARY
      (doctest suite "torchvision_oracle", skipped in its plain run) on them; exits with its status.
  torchvision_oracle.py fixtures DIR
      Only writes the fixtures (for debugging).

Fixtures, one set per case (convnext_tiny at 32x32; vit_b_16 at image_size 32; vit_b_32 at 64;
num_classes 10, batch 2), plain dicts saved with torch.save (torch::pickle_load reads those, not
the OrderedDict of state_dict()):
  <case>_init.pt     the state_dict right after torch.manual_seed(SEED) and construction
  <case>_weights.pt  the state_dict perturbed (no zero head, layer_scale ~0.1), so that every
                     parameter shapes the logits
  <case>_io.pt       "x", "labels"; "eval": eval-mode logits (no_grad); "train": training-mode
                     logits with every dropout and stochastic depth at 0, and "grad.<name>", each
                     parameter's gradient of cross_entropy(train logits, labels); "random_train":
                     training-mode logits with randomness on (ConvNeXt: stochastic_depth_prob 0.5;
                     ViT: dropout 0.1, attention_dropout 0.1 and timm's DropPath at rate 0.2 on
                     both residual branches, as timm's Block), after torch.manual_seed(RANDOM_SEED)
"""
import os
import subprocess
import sys
import tempfile
import types

import torch
import torch.nn.functional as F
import torchvision
from torchvision.models import convnext, vision_transformer

RANDOM_SEED = 5
CONVNEXT = {"tiny": convnext.convnext_tiny, "small": convnext.convnext_small, "base": convnext.convnext_base}
VIT = {"b_16": vision_transformer.vit_b_16, "b_32": vision_transformer.vit_b_32, "l_16": vision_transformer.vit_l_16}
# name, family, variant, image size, construction seed
CASES = [("convnext_tiny", "convnext", "tiny", 32, 11), ("vit_b_16", "vit", "b_16", 32, 12),
         ("vit_b_32", "vit", "b_32", 64, 13)]
DROP_PATH = 0.2


def table(path):
    lines = [f"# torchvision {torchvision.__version__} (torch {torch.__version__}) state_dict of every variant at "
             "num_classes 1000 (ViT at image_size 224).",
             "# Written by torchvision_oracle.py table; do not edit. Lines, state_dict order:",
             "#   model <convnext|vit> <variant> <parameter count>",
             "#   <p|b> <name> <d0,d1,...|->   (parameter or buffer, shape)",
             "#   sd <CNBlock prefix> <rate>   (ConvNeXt: the block's stochastic-depth rate, torchvision's default)"]
    for family, builders in (("convnext", CONVNEXT), ("vit", VIT)):
        for variant, build in builders.items():
            model = build()
            parameters = {name for name, _ in model.named_parameters()}
            lines.append(f"model {family} {variant} {sum(p.numel() for p in model.parameters())}")
            for name, t in model.state_dict().items():
                kind = "p" if name in parameters else "b"
                lines.append(f"{kind} {name} {','.join(map(str, t.shape)) or '-'}")
            for name, m in model.named_modules():
                if isinstance(m, convnext.CNBlock):
                    lines.append(f"sd {name} {m.stochastic_depth.p!r}")
            del model
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def build(family, variant, size, **kwargs):
    if family == "convnext":
        return CONVNEXT[variant](num_classes=10, **kwargs)
    return VIT[variant](num_classes=10, image_size=size, **kwargs)


def add_drop_path(model, rate):
    """timm's Block on torchvision's EncoderBlock: DropPath after the attention's dropout and
    after the MLP, rates torch.linspace(0, rate, depth) as timm's VisionTransformer."""
    from timm.layers import DropPath

    def forward(self, input):
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.drop_path(self.dropout(x)) + input
        return x + self.drop_path(self.mlp(self.ln_2(x)))

    layers = list(model.encoder.layers)
    for layer, p in zip(layers, [x.item() for x in torch.linspace(0, rate, len(layers))]):
        layer.drop_path = DropPath(p)
        layer.forward = types.MethodType(forward, layer)


def fixtures(directory):
    for name, family, variant, size, seed in CASES:
        torch.manual_seed(seed)
        model = build(family, variant, size, **({"stochastic_depth_prob": 0.0} if family == "convnext" else {}))
        torch.save(dict(model.state_dict()), os.path.join(directory, f"{name}_init.pt"))
        with torch.no_grad():
            for pname, p in model.named_parameters():
                p.add_(torch.randn_like(p) * 0.02)
                if pname.endswith("layer_scale"):
                    p.uniform_(0.05, 0.2)
        weights = dict(model.state_dict())
        torch.save(weights, os.path.join(directory, f"{name}_weights.pt"))

        x = torch.randn(2, 3, size, size)
        labels = torch.tensor([3, 7])
        io = {"x": x, "labels": labels}
        model.eval()
        with torch.no_grad():
            io["eval"] = model(x)
        model.train()
        logits = model(x)
        F.cross_entropy(logits, labels).backward()
        io["train"] = logits.detach()
        io.update({"grad." + n: p.grad for n, p in model.named_parameters()})

        if family == "convnext":
            noisy = build(family, variant, size, stochastic_depth_prob=0.5)
        else:
            noisy = build(family, variant, size, dropout=0.1, attention_dropout=0.1)
            add_drop_path(noisy, DROP_PATH)
        noisy.load_state_dict(weights)
        noisy.train()
        torch.manual_seed(RANDOM_SEED)
        with torch.no_grad():
            io["random_train"] = noisy(x)
        torch.save(io, os.path.join(directory, f"{name}_io.pt"))
        del model, noisy, io, weights


def check(binary):
    with tempfile.TemporaryDirectory() as directory:
        fixtures(directory)
        env = dict(os.environ, TP_ZOO_CONVNEXT_VIT_FIXTURES=directory)
        return subprocess.run([binary, "--no-skip", "--test-suite=torchvision_oracle"], env=env).returncode


if __name__ == "__main__":
    torch.set_num_threads(2)
    if sys.argv[1] == "table":
        table(sys.argv[2])
    elif sys.argv[1] == "fixtures":
        fixtures(sys.argv[2])
    elif sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} table FILE | check TEST_BINARY | fixtures DIR")
