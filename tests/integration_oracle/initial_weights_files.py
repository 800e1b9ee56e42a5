"""Writes the weight files of initial_weights_test.cpp into DIR, all holding the same values.

Usage: initial_weights_files.py DIR. Net is Linear(3, 4) -> BatchNorm1d(4), so the state has
buffers, an int64 one included; every floating tensor i (state_dict order) holds
arange(numel) * 0.25 + i, num_batches_tracked holds 7.
"""
import pathlib
import sys

import safetensors.torch
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.bn = torch.nn.BatchNorm1d(4)


def main(directory):
    directory = pathlib.Path(directory)
    net = Net()
    with torch.no_grad():
        for i, t in enumerate(net.state_dict().values()):
            if t.is_floating_point():
                t.copy_(torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape) * 0.25 + i)
            else:
                t.fill_(7)
    state = net.state_dict()  # an OrderedDict with a _metadata attribute
    torch.save(state, directory / "state_dict.pt")
    torch.save({"model": state, "epoch": 3}, directory / "nested.pt")
    safetensors.torch.save_file(dict(state), directory / "weights.safetensors")
    torch.save({"fc.weight": state["fc.weight"]}, directory / "single.pt")  # one key: SETITEM, not SETITEMS
    # A Lightning checkpoint of a module whose network is self.model and whose loss has a buffer,
    # and a DDP module's state_dict saved without .module: the same values under a prefix.
    lightning = {"model." + k: v for k, v in state.items()}
    lightning["criterion.pos_weight"] = torch.ones(4)
    torch.save({"state_dict": lightning, "epoch": 3, "global_step": 30}, directory / "lightning.ckpt")
    safetensors.torch.save_file({"module." + k: v for k, v in state.items()}, directory / "ddp.safetensors")
    (directory / "garbage.pt").write_bytes(b"not a weights file at all")


if __name__ == "__main__":
    main(sys.argv[1])
