"""The Lightning side of the GPU benchmark (gpu_bench.py): the same model (models.py), random pool,
optimizer settings and precision as python_loop.py, trained by a Lightning Trainer.

    lightning_loop.py --model resnet50 --classes 1000 --batch 128 --image-size 224 --precision bf16 \
                      --device cuda --steps 110 --window 10 --lr 0.1 --channels-last --cudnn-benchmark

Settings: Trainer(precision="bf16-mixed", benchmark=True for cuDNN benchmark), model and input in
channels-last, torch.optim.SGD (fused with --fused, which gpu_bench.py passes; else foreach on
CUDA), logger, checkpointing, progress bar and model summary off, max_steps=steps. Data:
python_loop.py's seeded pool, cut into batches and pinned once; a DataLoader (pin_memory,
num_workers=0) hands them out whole (batch_size=None), so what is timed is Lightning's loop and
its host-to-device copy, not per-sample collation (the other sides stack nothing on the training
thread either). The dataset is `steps` batches long (cycling the pool), so the run is one epoch,
as the host's run is.

Output: "lightning steps_per_s=<1/median window step time> windows=<n> params=<n> torch=<version>
lightning=<version>", on CUDA also "peak_alloc_mib=<n> peak_reserved_mib=<n>"; windows of --window
steps closed by a callback with a device sync, the first window (warm-up, cuDNN autotuning) left out.
"""
import argparse
import statistics
import time
import warnings

import torch
import torch.nn.functional as F

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

import models


class Classifier(pl.LightningModule):
    def __init__(self, model, lr, momentum, fused, memory_format):
        super().__init__()
        self.model = model
        self.lr, self.momentum, self.fused, self.memory_format = lr, momentum, fused, memory_format

    def on_after_batch_transfer(self, batch, dataloader_idx):
        x, y = batch
        return x.contiguous(memory_format=self.memory_format), y

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.model(x).float(), y)  # as python_loop.py: fp32 loss on the logits

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=self.momentum,
                               fused=True if self.fused else None)


class Cycle(torch.utils.data.Dataset):
    """`length` items cycling the ready batches."""

    def __init__(self, batches, length):
        self.batches, self.length = batches, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return self.batches[i % len(self.batches)]


class WindowTimer(pl.Callback):
    def __init__(self, window, cuda):
        self.window, self.cuda = window, cuda
        self.windows, self.steps, self.start = [], 0, 0.0
        self.peak_alloc = self.peak_reserved = 0.0

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def on_train_start(self, trainer, pl_module):
        self._sync()
        self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps += 1
        if self.steps % self.window == 0:
            self._sync()
            now = time.perf_counter()
            self.windows.append((now - self.start) / self.window)
            self.start = now

    def on_train_end(self, trainer, pl_module):
        # Read here: the strategy's teardown moves the model to the CPU and empties the cache after this.
        if self.cuda:
            self.peak_alloc = torch.cuda.max_memory_allocated() / 2**20
            self.peak_reserved = torch.cuda.max_memory_reserved() / 2**20


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave the default)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--pool", type=int, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--fused", action="store_true", help="torch.optim.SGD(fused=True): the host's kernel")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    a = p.parse_args()
    if a.steps < 2 * a.window:
        p.error("--steps must cover at least two windows (the first is left out)")
    warnings.filterwarnings("ignore", ".*does not have many workers.*")  # the data is in memory

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cuda = torch.device(a.device).type == "cuda"
    g = torch.Generator().manual_seed(1)  # python_loop.py's pool, same values
    images = torch.rand(a.pool, a.channels, a.image_size, a.image_size, generator=g) * 2 - 1
    labels = torch.randint(0, a.classes, (a.pool,), generator=g)
    batches = [(images[b:b + a.batch].clone(), labels[b:b + a.batch].clone())
               for b in range(0, images.shape[0] - a.batch + 1, a.batch)]
    if cuda:
        batches = [(x.pin_memory(), y.pin_memory()) for x, y in batches]
    loader = torch.utils.data.DataLoader(Cycle(batches, a.steps), batch_size=None, shuffle=False,
                                         num_workers=0, pin_memory=cuda)

    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    model = models.build(a.model, a.classes, a.channels, a.image_size).to(memory_format=memory_format)
    params = sum(t.numel() for t in model.parameters())
    module = Classifier(model, a.lr, a.momentum, a.fused, memory_format)
    timer = WindowTimer(a.window, cuda)
    trainer = pl.Trainer(accelerator="gpu" if cuda else "cpu", devices=1,
                         precision="bf16-mixed" if a.precision == "bf16" else "32-true",
                         benchmark=a.cudnn_benchmark, max_steps=a.steps, max_epochs=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0, callbacks=[timer])
    trainer.fit(module, train_dataloaders=loader)

    timed = timer.windows[1:]
    line = (f"lightning steps_per_s={1 / statistics.median(timed):.4f} windows={len(timed)} params={params} "
            f"torch={torch.__version__} lightning={pl.__version__}")
    if cuda:
        line += f" peak_alloc_mib={timer.peak_alloc:.1f} peak_reserved_mib={timer.peak_reserved:.1f}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
