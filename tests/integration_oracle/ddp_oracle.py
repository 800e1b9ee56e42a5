"""Python side of tests/dist/ddp_oracle_test.cpp: PyTorch's own DistributedDataParallel as the
oracle of the host's data-parallel training.

  ddp_oracle.py init DIR      the MLP's initial weights, DIR/init.pt (trajectory_oracle.py's)
  torchrun --nproc-per-node 2 ddp_oracle.py compare DIR
                              each rank trains the MLP from DIR/init.pt with
                              torch.nn.parallel.DistributedDataParallel over Gloo, reading the
                              shard the host's sampler gives it; rank 0 then compares with the
                              host runs DIR/<optimizer>/ and prints
                              "diff <optimizer> loss|weights <max relative difference>" and
                              "steps <optimizer> <host steps> <python steps>".

The data order is the host's, reimplemented here (framework/src/data/sampler.cpp): every rank
builds the epoch permutation, a std::mt19937_64 seeded with mix_seed(mix_seed(seed) ^ epoch)
driving a Fisher-Yates shuffle from the back whose draws are rejection-sampled, pads it by
wrapping around to a multiple of the world size, and reads positions rank, rank + W, ...
Keep SEED, SIZE, BATCH and EPOCHS in step with tests/dist/ddp_oracle.toml.
"""
import os
import pathlib
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from trajectory_oracle import MASK, MAX_NORM, OPTIMIZERS, Mlp, c_regression, host_run, loss_diff, mix64, weight_diff  # noqa: E402

SEED, SIZE, BATCH, EPOCHS = 7, 251, 16, 3  # 251 = 2 x 125 + 1: rank 1 reads one padded sample


class Mt19937_64:
    """std::mt19937_64 (the C++ standard fixes its every output)."""

    def __init__(self, seed):
        self.mt = [seed & MASK]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.index = 312

    def __call__(self):
        if self.index >= 312:
            for i in range(312):
                y = (self.mt[i] & 0xFFFFFFFF80000000) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                v = self.mt[(i + 156) % 312] ^ (y >> 1)
                if y & 1:
                    v ^= 0xB5026F5AA96619E9
                self.mt[i] = v
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK


def epoch_permutation(n, seed, epoch):
    gen = Mt19937_64(mix64(mix64(seed) ^ epoch))
    perm = list(range(n))
    for i in range(n, 1, -1):
        threshold = ((1 << 64) - i) % i  # 2^64 mod i: reject below it, no modulo bias
        while True:
            r = gen()
            if r >= threshold:
                break
        j = r % i
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    return perm


def shard(n, world, rank, epoch):
    """The host's DistributedSampler with SamplerTail::kPad (training, drop_last = false)."""
    perm = epoch_permutation(n, SEED, epoch)
    count = (n + world - 1) // world
    return [perm[(rank + k * world) % n] for k in range(count)]


def train(name, init, x, y, rank, world):
    """DDP over Gloo: the mean loss of this rank's micro-batch, gradients averaged over ranks by
    DDP's reducer, clip, step. Returns the per-step global mean loss and the final weights."""
    model = Mlp()
    model.load_state_dict(init)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    o = dict(OPTIMIZERS[name])
    groups = [{"params": decay, "weight_decay": o.pop("weight_decay")}, {"params": no_decay, "weight_decay": 0.0}]
    cls = torch.optim.SGD if name == "sgd" else torch.optim.AdamW
    opt = cls(groups, **o, foreach=False)
    losses = []
    for epoch in range(EPOCHS):
        mine = torch.tensor(shard(SIZE, world, rank, epoch))
        for start in range(0, len(mine), BATCH):
            index = mine[start:start + BATCH]
            out = ddp(x[index])
            loss = F.mse_loss(out, y[index])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            opt.step()
            # The host logs the loss of all ranks' items: (sum of losses) / (item count).
            total = torch.tensor([F.mse_loss(out.detach(), y[index], reduction="sum").double(), float(len(index))],
                                 dtype=torch.float64)
            dist.all_reduce(total)
            losses.append((total[0] / total[1]).item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def main(mode, directory):
    directory = pathlib.Path(directory)
    torch.set_num_threads(1)
    if mode == "init":
        torch.manual_seed(1234)
        torch.save(Mlp().state_dict(), directory / "init.pt")
        return
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    init = torch.load(directory / "init.pt", weights_only=True)
    x, y = c_regression("train", SIZE)
    for name in OPTIMIZERS:
        losses, weights = train(name, init, x, y, rank, world)
        if rank == 0:
            host_losses, host_weights, _, _ = host_run(directory / name)
            print("steps", name, len(host_losses), len(losses))
            print("diff", name, "loss", repr(loss_diff(host_losses, losses)))
            print("diff", name, "weights", repr(weight_diff(host_weights, weights)))
            print("moved", name, repr(weight_diff(init, weights)))
    # Both ranks are done once they meet here; then each leaves without PyTorch's teardown. Under
    # a loaded machine (the full suite at -j2) rank 1 aborted in it twice ("terminate called
    # without an active exception" from Gloo's threads, with or without destroy_process_group),
    # after every figure had printed and matched; the figures are all this oracle gives.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
