"""The Python side's models: the same architectures as the host's plugins, in plain torch.nn.

State names and shapes equal the plugins' (the benchmark compares parameter counts):
  SmallCnn  = org.torchhost.small_cnn (plugins/models/vision): three conv3x3(no bias)-BN-ReLU-
              maxpool2 blocks (width, 2w, 2w), global max pool, linear.
  resnet()  = org.torchhost.resnet (plugins/models/resnet), which mirrors torchvision's ResNet
              18/34/50 (Bottleneck v1.5). Written out here so this file needs no torchvision
              (it does not import with the project's torch 2.13, nor on the GPU machine).
"""
import torch
from torch import nn
import torch.nn.functional as F


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


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, in_channels=3):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1)
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet(depth: int, num_classes: int, in_channels: int = 3) -> ResNet:
    spec = {18: (BasicBlock, [2, 2, 2, 2]), 34: (BasicBlock, [3, 4, 6, 3]), 50: (Bottleneck, [3, 4, 6, 3])}
    block, layers = spec[depth]
    return ResNet(block, layers, num_classes, in_channels)


def build(name: str, num_classes: int, in_channels: int = 3) -> nn.Module:
    """"small_cnn", "resnet18", "resnet34" or "resnet50"."""
    if name == "small_cnn":
        return SmallCnn(num_classes, in_channels)
    return resnet(int(name.removeprefix("resnet")), num_classes, in_channels)
