"""timm and Lightning oracle for schedule.interval, warmup_epochs, warmup_lr, warmup_prefix and
cooldown_epochs (docs/schedules.md, "timm and Lightning").

schedule_driver (C++) prints the lr every optimizer step of a run trains with, built as the trainer
builds it. Here timm's scheduler (create_scheduler_v2, and CosineLRScheduler itself) is driven as
timm's train.py drives it: step_update(num_updates) after each optimizer update, step(epoch + 1)
after each epoch, an update at every grad-accumulation window and at the epoch's last batch; and
Lightning 2.6's Trainer runs torch schedules with interval="epoch". Every step's lr must agree to
1e-12 relative (timm adds its warm-up increment, the host scales a fraction: rounding only).
Needs timm and lightning in .venv-bench (scripts/bench_setup); exits 77 (SKIP) naming the reason
without them.
Usage: schedule_timm_oracle.py <schedule_driver>
"""
import subprocess
import sys
import warnings

try:
    import torch
    from timm.scheduler import CosineLRScheduler, create_scheduler_v2
except ImportError as error:
    print(f"SKIP: timm is not importable ({error}); run scripts/bench_setup")
    sys.exit(77)

LR = 1e-3
failures = []


def host(driver, epochs, batches, accum, **keys):
    args = [driver, repr(LR), str(epochs), str(batches), str(accum)]
    args += [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in keys.items()]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [[float.fromhex(v) for v in line.split()] for line in out.splitlines()]


def optimizer(lr_scale):
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": LR}]
    if lr_scale:
        groups.append({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": LR, "lr_scale": lr_scale})
    return torch.optim.SGD(groups, lr=LR)


def timm_loop(opt, sched, epochs, batches, accum):
    """timm train.py's order of updates and scheduler calls; the lrs each update trains with."""
    lrs, updates = [], 0
    for epoch in range(epochs):
        for i in range(batches):
            if (i + 1) % accum == 0 or i == batches - 1:
                lrs.append([g["lr"] for g in opt.param_groups])
                opt.step()
                updates += 1
                sched.step_update(num_updates=updates)
        sched.step(epoch + 1)
    return lrs


def timm_v2(batches, accum, on_updates=False, lr_scale=0, **kwargs):
    opt = optimizer(lr_scale)
    per_epoch = (batches + accum - 1) // accum
    sched, epochs = create_scheduler_v2(opt, sched="cosine", step_on_epochs=not on_updates,
                                        updates_per_epoch=per_epoch, **kwargs)
    return timm_loop(opt, sched, epochs, batches, accum), epochs


def compare(name, ours, theirs, show=False):
    worst = 0.0
    ok = len(ours) == len(theirs)
    for a_row, b_row in zip(ours, theirs):
        for a, b in zip(a_row, b_row):
            diff = abs(a - b)
            worst = max(worst, diff / abs(b) if b else diff)
            ok = ok and (diff <= 1e-12 * abs(b) or diff <= 1e-18)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(ours)} steps (oracle {len(theirs)}), max rel diff {worst:.2e}")
    if show or not ok:
        print("     host:  " + " ".join(f"{r[0]:.4g}" for r in ours[:40]))
        print("     oracle: " + " ".join(f"{r[0]:.4g}" for r in theirs[:40]))
    if not ok:
        failures.append(name)


def timm_cases(driver):
    # The trial's run (finding 7): 3 epochs of 6 batches with accumulation 2, warm-up 1 epoch from
    # warmup_lr 1e-5, min_lr 1e-5; timm's default: per epoch, warm-up under the cosine.
    common = dict(warmup_epochs=1, warmup_lr=1e-5, min_lr=1e-5)
    theirs, epochs = timm_v2(6, 2, num_epochs=3, **common)
    compare("timm default (per epoch, warm-up overlaid), 3 epochs x 3 updates",
            host(driver, epochs, 6, 2, name="cosine", interval="epoch", warmup_prefix=False, **common), theirs, True)
    theirs, epochs = timm_v2(6, 2, on_updates=True, num_epochs=3, **common)
    compare("timm --sched-on-updates, 3 epochs x 3 updates",
            host(driver, epochs, 6, 2, name="cosine", warmup_prefix=False, **common), theirs, True)
    theirs, epochs = timm_v2(6, 2, num_epochs=3, warmup_prefix=True, **common)
    compare(f"timm --warmup-prefix per epoch (train.epochs = {epochs})",
            host(driver, epochs, 6, 2, name="cosine", interval="epoch", **common), theirs, True)
    theirs, epochs = timm_v2(6, 2, on_updates=True, num_epochs=3, warmup_prefix=True, **common)
    compare(f"timm --sched-on-updates --warmup-prefix (train.epochs = {epochs})",
            host(driver, epochs, 6, 2, name="cosine", **common), theirs, True)
    # 37 batches with accumulation 4: 10 updates an epoch, the last a window of one batch.
    recipe = dict(warmup_epochs=2, warmup_lr=1e-6, min_lr=1e-5, cooldown_epochs=2)
    theirs, epochs = timm_v2(37, 4, num_epochs=8, **recipe)
    compare(f"timm per epoch, --cooldown-epochs 2 (train.epochs = {epochs}), accumulation 4 over 37 batches",
            host(driver, epochs, 37, 4, name="cosine", interval="epoch", warmup_prefix=False, **recipe), theirs, True)
    theirs, epochs = timm_v2(37, 4, on_updates=True, num_epochs=6, warmup_prefix=True, **recipe)
    compare(f"timm --sched-on-updates --warmup-prefix --cooldown-epochs 2 (train.epochs = {epochs})",
            host(driver, epochs, 37, 4, name="cosine", **recipe), theirs)
    theirs, epochs = timm_v2(37, 4, lr_scale=0.1, num_epochs=8, **recipe)
    compare("timm per epoch, a second group at lr_scale 0.1 (layer decay)",
            host(driver, epochs, 37, 4, name="cosine", interval="epoch", warmup_prefix=False, lr_scale=0.1, **recipe),
            theirs)
    theirs, epochs = timm_v2(37, 4, num_epochs=8, **recipe)
    compare("timm per epoch, the host resumed mid-epoch (after step 37)",
            host(driver, epochs, 37, 4, name="cosine", interval="epoch", warmup_prefix=False, resume_at=37, **recipe),
            theirs)
    # CosineLRScheduler itself: t_initial, warmup_t, warmup_lr_init, lr_min, warmup_prefix, cycle_limit.
    for prefix in (False, True):
        opt = optimizer(0)
        sched = CosineLRScheduler(opt, t_initial=10, lr_min=2e-5, warmup_t=3, warmup_lr_init=5e-5,
                                  warmup_prefix=prefix, cycle_limit=1, t_in_epochs=True)
        epochs = 10 + (3 if prefix else 0) + 2  # two epochs past the cycle: held at lr_min
        theirs = timm_loop(opt, sched, epochs, 37, 4)
        compare(f"CosineLRScheduler(t_initial=10, warmup_t=3, warmup_prefix={prefix}, cycle_limit=1) per epoch",
                host(driver, epochs, 37, 4, name="cosine", interval="epoch", warmup_epochs=3, warmup_lr=5e-5,
                     min_lr=2e-5, warmup_prefix=prefix, cooldown_epochs=2), theirs)


def lightning_cases(driver):
    try:
        import lightning as L
    except ImportError as error:
        print(f"SKIP (Lightning cases): lightning is not importable ({error})")
        return
    warnings.simplefilter("ignore")
    import logging
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)

    class Module(L.LightningModule):
        def __init__(self, make):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.make, self.lrs = make, []

        def training_step(self, batch, _):
            return self.layer(batch[0]).sum()

        def on_before_optimizer_step(self, optimizer):
            self.lrs.append([g["lr"] for g in optimizer.param_groups])

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=LR)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": self.make(opt), "interval": "epoch"}}

    def lightning(make, epochs, batches, accum):
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(batches, 1)), batch_size=1)
        module = Module(make)
        L.Trainer(max_epochs=epochs, accumulate_grad_batches=accum, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False, enable_model_summary=False, accelerator="cpu").fit(module, data)
        return module.lrs

    S = torch.optim.lr_scheduler
    compare("Lightning CosineAnnealingLR(T_max=5, eta_min=1e-5), interval='epoch', accumulation 4 over 37 batches",
            host(driver, 5, 37, 4, name="cosine", interval="epoch", min_lr=1e-5),
            lightning(lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=1e-5), 5, 37, 4), True)
    compare("Lightning StepLR(step_size=2, gamma=0.5), interval='epoch'",
            host(driver, 5, 37, 4, name="step", interval="epoch", step_size=2, gamma=0.5),
            lightning(lambda o: S.StepLR(o, step_size=2, gamma=0.5), 5, 37, 4))
    compare("Lightning MultiStepLR([1, 3], gamma=0.3), interval='epoch'",
            host(driver, 5, 37, 4, name="multistep", interval="epoch", milestones="1,3", gamma=0.3),
            lightning(lambda o: S.MultiStepLR(o, [1, 3], gamma=0.3), 5, 37, 4))


if __name__ == "__main__":
    timm_cases(sys.argv[1])
    lightning_cases(sys.argv[1])
    if failures:
        print(f"{len(failures)} case(s) differ: {failures}")
        sys.exit(1)
