"""Python side of resnet_test.cpp: torchvision's ResNet rewritten with plain torch.nn.

torchvision does not import beside the project venv's torch, so this is the reference instead:
torchvision/models/resnet.py (BasicBlock, Bottleneck v1.5, ResNet._make_layer) with the same
module names, so state_dict() has torchvision's keys.

  resnet_reference.py keys          prints "<depth> <classes> <in_channels> <name> <d0,d1,..> <p|b>"
                                    for every state_dict entry of each configuration in CONFIGS,
                                    then "count <depth> <classes> <in_channels> <parameters>"
  resnet_reference.py weights DIR   for depth 18 and 50 (10 classes): DIR/resnet<d>_weights.pt,
                                    the state_dict with non-trivial BatchNorm statistics, as a
                                    plain dict (torch::pickle_load reads that, not the
                                    OrderedDict); DIR/resnet<d>_io.pt, a
                                    plain dict: "x" [2, 3, 64, 64], "eval" (logits in eval mode),
                                    "train" (logits of a training-mode forward) and "after.<name>"
                                    for every buffer after that forward (running stats moved)
  resnet_reference.py torchvision FILE   torch.save(state_dict) of a resnet18 with 3 classes,
                                    exactly as a user saves torchvision weights (OrderedDict with
                                    _metadata), for train.init_weights in torchscript_host_test.cpp
  resnet_reference.py compare A B   for two host checkpoints (torch.load reads them): prints
                                    "model <differing> of <tensors> differ; rng_cpu <same|differs>",
                                    the model tensors compared bit for bit (resnet_host_test.cpp)
"""
import pathlib
import sys

import torch
from torch import nn

CONFIGS = [(18, 1000, 3), (34, 1000, 3), (50, 1000, 3), (18, 10, 1), (50, 7, 4)]


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
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


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
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, depth, num_classes=1000, in_channels=3):
        super().__init__()
        block = Bottleneck if depth == 50 else BasicBlock
        layers = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3]}[depth]
        self.inplanes = 64
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def keys():
    for depth, classes, channels in CONFIGS:
        model = ResNet(depth, classes, channels)
        parameters = {name for name, _ in model.named_parameters()}
        for name, t in model.state_dict().items():
            kind = "p" if name in parameters else "b"
            print(depth, classes, channels, name, ",".join(map(str, t.shape)) or "-", kind)
        print("count", depth, classes, channels, sum(p.numel() for p in model.parameters()))


def weights(directory):
    for depth in (18, 50):
        torch.manual_seed(depth)
        model = ResNet(depth, 10, 3)
        with torch.no_grad():
            # Trained-looking BatchNorm statistics, so wiring a norm to the wrong conv shows.
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0.0, 0.1)
                    m.running_mean.normal_(0.0, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
                    m.num_batches_tracked.fill_(7)
        torch.save(dict(model.state_dict()), directory / f"resnet{depth}_weights.pt")
        x = torch.randn(2, 3, 64, 64)
        with torch.no_grad():
            out = {"x": x, "eval": model.eval()(x), "train": model.train()(x)}
        out.update({"after." + k: v.clone() for k, v in model.named_buffers()})
        torch.save(out, directory / f"resnet{depth}_io.pt")


def compare(a_file, b_file):
    a, b = (torch.load(f, weights_only=False) for f in (a_file, b_file))
    assert a["model"].keys() == b["model"].keys()
    differing = sum(not torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    rng = "same" if torch.equal(a["rng_cpu"], b["rng_cpu"]) else "differs"
    print(f"model {differing} of {len(a['model'])} differ; rng_cpu {rng}")


if __name__ == "__main__":
    if sys.argv[1] == "keys":
        keys()
    elif sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "torchvision":
        torch.manual_seed(18)
        torch.save(ResNet(18, 3).state_dict(), sys.argv[2])
    else:
        weights(pathlib.Path(sys.argv[2]))
