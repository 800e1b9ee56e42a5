"""torchvision's EfficientNet and MobileNetV3 as the oracle of efficientnet.so (tests/plugins/zoo_efficientnet).

Runs with .venv-bench's Python (torch 2.14.1, torchvision 0.29.1): torchvision does not import
beside the project venv's torch.

  efficientnet_oracle.py table FILE      writes the table that efficientnet_test.cpp checks every
                                         variant against (num_classes 1000, in_channels 3):
                                           "<component> <variant> <name> <d0,d1,..|-> <p|b>" for every
                                           parameter (named_parameters order), then every buffer
                                           (named_buffers order): the order visit_state lends them;
                                           "count <component> <variant> <parameters>";
                                           "sd <variant> <block prefix> <p>" for every MBConv block
                                           at the default stochastic_depth_prob 0.2 (repr: exact)
  efficientnet_oracle.py fixtures DIR    for each model of NUMERIC (num_classes 10): DIR/<tag>_weights.pt,
                                         the state_dict with trained-looking BatchNorm statistics as a
                                         plain dict (torch::pickle_load reads that, not an
                                         OrderedDict), and DIR/<tag>_io.pt, a plain dict: "x"
                                         [2, 3, 64, 64], "label", "eval" (eval logits), "train"
                                         (training-mode logits, dropout 0, stochastic depth 0),
                                         "grad.<name>" (every parameter's gradient of
                                         cross_entropy(train, label)), "after.<name>" (every buffer
                                         after that forward), and "random" (training-mode logits of
                                         the loaded weights with dropout 0.3 and
                                         stochastic_depth_prob 0.5 after torch.manual_seed(1234): the
                                         same dropped rows need the same draws in the same order)
  efficientnet_oracle.py run TABLE TEST  the ctest entry (zoo_efficientnet_oracle): checks that the
                                         committed TABLE is what torchvision gives, writes the
                                         fixtures into a fresh directory and runs the doctest binary
                                         TEST's oracle cases on them (TP_EFFICIENTNET_FIXTURES); exits
                                         with its status
"""
import os
import pathlib
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch import nn
from torchvision import models
from torchvision.ops import StochasticDepth

EFFICIENTNETS = [f"b{i}" for i in range(8)]
MOBILENETS = ["small", "large"]
# (tag, builder, whether gradients are compared). B5 stands for B5-B7's BatchNorm (eps 1e-3,
# momentum 0.01); its gradients would add 120 MB of fixtures and no new layer, so it has none.
NUMERIC = [
    ("efficientnet_b0", "efficientnet", "b0", True),
    ("efficientnet_b3", "efficientnet", "b3", True),
    ("efficientnet_b5", "efficientnet", "b5", False),
    ("mobilenet_v3_small", "mobilenet_v3", "small", True),
    ("mobilenet_v3_large", "mobilenet_v3", "large", True),
]


def build(component, variant, **kwargs):
    name = f"efficientnet_{variant}" if component == "efficientnet" else f"mobilenet_v3_{variant}"
    return getattr(models, name)(**kwargs)


def shape(t):
    return ",".join(map(str, t.shape)) or "-"


def table_lines():
    lines = []
    for component, variants in (("efficientnet", EFFICIENTNETS), ("mobilenet_v3", MOBILENETS)):
        for variant in variants:
            torch.manual_seed(0)
            model = build(component, variant)
            for name, p in model.named_parameters():
                lines.append(f"{component} {variant} {name} {shape(p)} p")
            for name, b in model.named_buffers():
                lines.append(f"{component} {variant} {name} {shape(b)} b")
            lines.append(f"count {component} {variant} {sum(p.numel() for p in model.parameters())}")
            for name, m in model.named_modules():
                if isinstance(m, StochasticDepth):
                    lines.append(f"sd {variant} {name.rsplit('.', 1)[0]} {m.p!r}")
    return lines


def randomise_norms(model):
    """Trained-looking BatchNorm parameters and statistics, so a norm wired to the wrong conv, or
    the wrong eps, shows in eval mode."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)


def fixtures(directory):
    for i, (tag, component, variant, gradients) in enumerate(NUMERIC):
        torch.manual_seed(100 + i)
        kwargs = {"num_classes": 10, "dropout": 0.0}
        if component == "efficientnet":
            kwargs["stochastic_depth_prob"] = 0.0
        model = build(component, variant, **kwargs)
        randomise_norms(model)
        weights = {k: v.clone() for k, v in model.state_dict().items()}
        torch.save(weights, directory / f"{tag}_weights.pt")

        x = torch.randn(2, 3, 64, 64)
        label = torch.tensor([3, 8])
        out = {"x": x, "label": label}
        with torch.no_grad():
            out["eval"] = model.eval()(x)
        model.train()
        train = model(x)
        out["train"] = train.detach()
        if gradients:
            F.cross_entropy(train, label).backward()
            out.update({"grad." + k: p.grad.clone() for k, p in model.named_parameters()})
        out.update({"after." + k: v.clone() for k, v in model.named_buffers()})

        random_kwargs = dict(kwargs, dropout=0.3)
        if component == "efficientnet":
            random_kwargs["stochastic_depth_prob"] = 0.5
        randomised = build(component, variant, **random_kwargs)
        randomised.load_state_dict(weights)
        randomised.train()
        torch.manual_seed(1234)
        with torch.no_grad():
            out["random"] = randomised(x)
        torch.save(out, directory / f"{tag}_io.pt")


def run(table, test_binary):
    committed = pathlib.Path(table).read_text().splitlines()
    if committed != table_lines():
        print(f"FAIL: {table} differs from torchvision {models.__name__} "
              f"(regenerate: efficientnet_oracle.py table {table})")
        return 1
    print(f"table: {len(committed)} lines equal torchvision's")
    with tempfile.TemporaryDirectory(prefix="zoo_efficientnet_") as directory:
        fixtures(pathlib.Path(directory))
        env = dict(os.environ, TP_EFFICIENTNET_FIXTURES=directory)
        return subprocess.call([test_binary, "--no-skip", "--test-case=*torchvision oracle*"], env=env)


if __name__ == "__main__":
    if sys.argv[1] == "table":
        pathlib.Path(sys.argv[2]).write_text("\n".join(table_lines()) + "\n")
    elif sys.argv[1] == "fixtures":
        fixtures(pathlib.Path(sys.argv[2]))
    else:
        sys.exit(run(sys.argv[2], sys.argv[3]))
