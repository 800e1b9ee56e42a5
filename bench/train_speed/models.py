"""The Python side's models: the same architectures as the host's plugins, in plain torch.nn.

State names and shapes equal the plugins' (the benchmark compares parameter counts):
  SmallCnn  = org.torchhost.small_cnn (plugins/models/vision): three conv3x3(no bias)-BN-ReLU-
              maxpool2 blocks (width, 2w, 2w), global max pool, linear.
  Mlp       = org.torchhost.mlp (plugins/models/vision/mlp.cpp) with its default keys: the input
              flattened, Linear(in_features, 256)-ReLU, Linear(256, 128)-ReLU, Linear(128, classes)
              as fc1, fc2, head (dropout 0: none); 820,874 parameters at 3x32x32 and 10 classes.
  resnet()  = org.torchhost.resnet (plugins/models/resnet), which mirrors torchvision's ResNet
              18/34/50 (Bottleneck v1.5): the plain torch.nn copy of torchvision's code that
              zoo_tests already checks the plugin against (tests/plugins/models/resnet_reference.py),
              so this needs no torchvision (it does not import with the project's torch 2.13,
              nor on the GPU machine).
"""
import pathlib
import sys

from torch import nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "plugins" / "models"))
from resnet_reference import ResNet  # noqa: E402


class _Trunk(nn.Module):
    def __init__(self, in_channels: int, width: int):
        super().__init__()
        ch = [in_channels, width, 2 * width, 2 * width]
        for i in range(3):
            self.add_module(f"conv{i + 1}", nn.Conv2d(ch[i], ch[i + 1], 3, padding=1, bias=False))
            self.add_module(f"bn{i + 1}", nn.BatchNorm2d(ch[i + 1]))

    def forward(self, x):
        for i in range(1, 4):
            x = F.max_pool2d(getattr(self, f"bn{i}")(getattr(self, f"conv{i}")(x)).relu_(), 2)
        return x


class SmallCnn(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 3, width: int = 32):
        super().__init__()
        self.trunk = _Trunk(in_channels, width)
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        return self.head(self.trunk(x).amax((2, 3)))


class Mlp(nn.Module):
    def __init__(self, in_features: int = 3 * 32 * 32, num_classes: int = 10, hidden=(256, 128)):
        super().__init__()
        widths = [in_features, *hidden]
        for i in range(len(hidden)):
            self.add_module(f"fc{i + 1}", nn.Linear(widths[i], widths[i + 1]))
        self.depth = len(hidden)
        self.head = nn.Linear(widths[-1], num_classes)

    def forward(self, x):
        x = x.flatten(1)  # the plugin's reshape to [B, in_features]
        for i in range(1, self.depth + 1):
            x = getattr(self, f"fc{i}")(x).relu_()
        return self.head(x)


def resnet(depth: int, num_classes: int, in_channels: int = 3) -> nn.Module:
    return ResNet(depth, num_classes, in_channels)


def build(name: str, num_classes: int, in_channels: int = 3, image_size: int = 32) -> nn.Module:
    """"small_cnn", "mlp" (over in_channels x image_size^2 inputs), "resnet18", "resnet34", "resnet50",
    or torchvision's "efficientnet_b0" and "vit_b_16" (at 64x64: the benchmark's image size), which
    need torchvision (.venv-bench)."""
    if name == "small_cnn":
        return SmallCnn(num_classes, in_channels)
    if name == "mlp":
        return Mlp(in_channels * image_size * image_size, num_classes)
    if name == "efficientnet_b0":
        import torchvision
        return torchvision.models.efficientnet_b0(num_classes=num_classes)
    if name == "vit_b_16":
        import torchvision
        return torchvision.models.vit_b_16(num_classes=num_classes, image_size=64)
    return resnet(int(name.removeprefix("resnet")), num_classes, in_channels)
