"""The EMA oracle (weight_average_test.cpp): PyTorch's own AveragedModel fed the host's weights.

usage: ema_oracle.py RUN_DIR DECAY WARMUP EVERY_STEPS BUFFERS

RUN_DIR/checkpoints/step-NNNNNNNN.pt holds the live weights after every optimizer step (the test
saves every step) and the host's average ("ema") after it. The weights of steps 1..N go through
torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn(DECAY) (or, with WARMUP, the same
lerp with timm's warmed-up decay min(DECAY, 1 - (1 + n)^(-2/3)), n = updates averaged so far) on
every EVERY_STEPS-th step, use_buffers = (BUFFERS == "average"). Prints, for the last step,
  diff <max relative difference over floating-point tensors> <tensors compared>
  int_equal <0|1>      integer buffers equal the live model's at the last update (the host copies them)
"""
import glob
import os
import sys

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


class Flat(nn.Module):
    """The model's state as a module: parameters and buffers in the host's order."""

    def __init__(self, state):
        super().__init__()
        self.names = list(state)
        for i, (name, tensor) in enumerate(state.items()):
            if name.endswith(BUFFER_SUFFIXES):
                self.register_buffer(f"t{i}", tensor.clone())
            else:
                self.register_parameter(f"t{i}", nn.Parameter(tensor.clone()))

    def load(self, state):
        with torch.no_grad():
            for i, name in enumerate(self.names):
                getattr(self, f"t{i}").copy_(state[name])

    def named_state(self):
        return {name: getattr(self, f"t{i}") for i, name in enumerate(self.names)}


def warmed_up_ema(decay):
    @torch.no_grad()
    def update(averaged, current, num_averaged):
        if not averaged[0].is_floating_point():  # integer buffers: compared with the live model below
            return
        n = float(num_averaged)
        decay_n = min(decay, 1.0 - (1.0 + n) ** (-2.0 / 3.0))
        torch._foreach_lerp_(averaged, current, 1.0 - decay_n)
    return update


def main():
    run_dir, decay, warmup, every, buffers = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "true", int(sys.argv[4]), sys.argv[5]
    files = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step-*.pt")))
    assert files, f"no step checkpoints in {run_dir}"
    steps = [torch.load(f, weights_only=True) for f in files]
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1)), "a step checkpoint is missing"
    model = Flat(steps[0]["model"])
    fn = warmed_up_ema(decay) if warmup else get_ema_multi_avg_fn(decay)
    average = AveragedModel(model, multi_avg_fn=fn, use_buffers=(buffers == "average"))
    last_update = None
    for s in steps:
        if s["step"] % every == 0:
            model.load(s["model"])
            average.update_parameters(model)
            last_update = s
    host = steps[-1]["ema"]
    assert steps[-1]["ema_updates"] == int(average.n_averaged), (steps[-1]["ema_updates"], int(average.n_averaged))
    worst, compared, ints_equal = 0.0, 0, True
    for name, expected in average.module.named_state().items():
        got = host[name]
        if expected.is_floating_point():
            scale = expected.abs().max().clamp_min(1e-12)
            worst = max(worst, float((got.double() - expected.double()).abs().max() / scale))
            compared += 1
        else:
            ints_equal &= bool(torch.equal(got, last_update["model"][name]))
    print(f"diff {worst:.3e} {compared}")
    print(f"int_equal {int(ints_equal)}")


if __name__ == "__main__":
    main()
