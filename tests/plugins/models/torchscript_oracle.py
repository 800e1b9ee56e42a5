"""Python side of torchscript_test.cpp and torchscript_host_test.cpp.

  torchscript_oracle.py script DIR    writes the TorchScript modules the tests load:
      mlp.pt      Linear(4, 16) - BatchNorm1d - ReLU - Linear(16, 1), forward(x) -> Tensor
                  (the acceptance model: trained by the host on org.torchhost.test.c_regression)
      tuple.pt    forward(x) -> Tuple[Tensor, Tensor]
      list.pt     forward(x) -> List[Tensor]
      dict.pt     forward(a, b) -> Dict[str, Tensor], b optional
      returns_int.pt   forward(x) -> int (not an output the host can name)
      state_dict.pt    torch.save(state_dict): a zip, but not TorchScript
      other.zip        a zip that is neither
    and io.pt, a plain dict of inputs and the eager modules' outputs: "x" [8, 4], "a", "b",
    "mlp.train", "mlp.eval", "tuple.0", "tuple.1", "list.0", "list.1", "dict.sum", "dict.prod",
    "dict.sum_a" (b left out), and "mlp.after.<buffer>" after the training-mode forward.
  torchscript_oracle.py check DIR WEIGHTS   loads DIR/mlp.pt, then the host's trained weights
    (WEIGHTS, `host export` safetensors) into it, evaluates both on the c_regression "val"
    split and prints "initial_val_loss", "trained_val_loss" (mean squared error over the split,
    float64 sum of float32 per-batch sums, batches of EVAL_BATCH as the host evaluates) and
    "max_output_change".

The c_regression data comes from tests/integration_oracle/trajectory_oracle.py (bit-exact
reimplementation of the plain-C fixture).
"""
import pathlib
import sys
import zipfile
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "integration_oracle"))
from trajectory_oracle import c_regression  # noqa: E402

SIZE, EVAL_BATCH = 256, 32  # torchscript_train.toml: data.train.size, train.batch_size


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.bn = nn.BatchNorm1d(16)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.fc1(x))))


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x) -> Tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        return y, y.sum(1)


class ListOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x) -> List[torch.Tensor]:
        y = self.fc(x)
        return [y, y * 2.0]


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([1.5, -0.5, 2.0, 1.0]))

    def forward(self, a, b: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        s = a * self.scale
        if b is None:
            return {"sum_a": s.sum(1)}
        return {"sum": s + b, "prod": s * b}


class ReturnsInt(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x) -> int:
        return int(self.fc(x).numel())


def script(directory):
    torch.manual_seed(0)
    x = torch.randn(8, 4)
    a, b = torch.randn(8, 4), torch.randn(8, 4)
    io = {"x": x, "a": a, "b": b}
    mlp = Mlp()
    torch.jit.script(mlp).save(str(directory / "mlp.pt"))
    with torch.no_grad():
        io["mlp.eval"] = mlp.eval()(x)
        io["mlp.train"] = mlp.train()(x)
    io.update({"mlp.after." + k: v.clone() for k, v in mlp.named_buffers()})
    for name, module in (("tuple", TupleOut()), ("list", ListOut())):
        torch.jit.script(module).save(str(directory / f"{name}.pt"))
        with torch.no_grad():
            for i, t in enumerate(module(x)):
                io[f"{name}.{i}"] = t
    d = DictOut()
    torch.jit.script(d).save(str(directory / "dict.pt"))
    with torch.no_grad():
        io.update({"dict." + k: v for k, v in d(a, b).items()})
        io.update({"dict." + k: v for k, v in d(a).items()})
    torch.jit.script(ReturnsInt()).save(str(directory / "returns_int.pt"))
    torch.save(Mlp().state_dict(), directory / "state_dict.pt")
    with zipfile.ZipFile(directory / "other.zip", "w") as archive:
        archive.writestr("readme.txt", "a zip that is neither TorchScript nor torch.save")
    torch.save(io, directory / "io.pt")


def val_loss(module, x, y):
    """The host's evaluation: per-batch sums of per-item squared errors in float32, added in
    float64, divided by the item count."""
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(x), EVAL_BATCH):
            pred = module(x[start:start + EVAL_BATCH])
            total += float(((pred - y[start:start + EVAL_BATCH]) ** 2).reshape(len(pred), -1).mean(1).sum())
    return total / len(x)


def check(directory, weights):
    from safetensors.torch import load_file

    x, y = c_regression("val", SIZE)
    initial = torch.jit.load(str(directory / "mlp.pt")).eval()
    trained = torch.jit.load(str(directory / "mlp.pt")).eval()
    state = load_file(str(weights))
    trained.load_state_dict(state, strict=True)  # host names == the scripted module's names
    with torch.no_grad():
        change = float((trained(x) - initial(x)).abs().max())
    print("initial_val_loss", repr(val_loss(initial, x, y)))
    print("trained_val_loss", repr(val_loss(trained, x, y)))
    print("max_output_change", repr(change))


if __name__ == "__main__":
    if sys.argv[1] == "script":
        script(pathlib.Path(sys.argv[2]))
    else:
        check(pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]))
