"""torchvision, torch and smp oracle for basic_losses' segmentation losses (dense trial F4).

segmentation_losses_driver (C++) runs each case through the plugin's C ABI on the inputs written
here (float32 outputs, int64 or float32 targets) and writes the loss sum, the count and the
gradient of the sum. Each is checked against the reference computed in float64 from the same
float32 inputs: the mean sum / count, and the gradient of the reference's sum (the mean times the
plugin's count), within 1e-5 relative (largest element for gradients); the largest differences
are printed.

- org.torchhost.bce_with_logits on [B, 1, H, W] and [B, C, H, W]: F.binary_cross_entropy_with_logits
  on the elements whose mask pixel is not ignore_index (binary 0/1 masks, class ids one-hot, float
  targets, pos_weight per channel, empty and full foreground, every pixel ignored).
- org.torchhost.focal: torchvision.ops.sigmoid_focal_loss(reduction="mean") on the same kinds of
  targets; integer class-id masks against smp's FocalLoss(mode="multiclass").
- org.torchhost.dice: smp's DiceLoss in its three modes, ignore_index, smooth, log_loss, classes,
  from_logits = false, an absent class, empty and full foreground.
- org.torchhost.weighted_sum: cross entropy + 0.5 Dice, items "labelled" (F.cross_entropy with
  ignore_index + 0.5 smp DiceLoss) and "samples".

smp (segmentation-models-pytorch 0.6) is not in .venv-bench: set TP_SMP_PATH to a site-packages
holding it (pip install --no-deps segmentation-models-pytorch --target DIR); without it the smp
cases use smp 0.6's DiceLoss and FocalLoss formulas written out below (smp_dice, smp_focal).
Needs .venv-bench (torch, torchvision); run_bench_oracle.sh exits 77 (SKIP) without it.
Usage: segmentation_losses_oracle.py <driver> <basic_losses.so>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torchvision.ops import sigmoid_focal_loss

if os.environ.get("TP_SMP_PATH"):
    sys.path.insert(0, os.environ["TP_SMP_PATH"])
try:
    from segmentation_models_pytorch.losses import DiceLoss, FocalLoss
    SMP = "smp"
except ImportError:
    DiceLoss = FocalLoss = None
    SMP = "smp 0.6's formulas"

TOL = 1e-5
failures = []
worst = {"value": 0.0, "grad": 0.0}


def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message)
    if not ok:
        failures.append(message)


def smp_dice(pred, truth, mode, from_logits=True, smooth=0.0, eps=1e-7, ignore_index=None, log_loss=False, classes=None):
    """smp 0.6's DiceLoss.forward, written out (the fallback without the package)."""
    if DiceLoss is not None:
        return DiceLoss(mode, classes=classes, log_loss=log_loss, from_logits=from_logits, smooth=smooth,
                        ignore_index=ignore_index, eps=eps)(pred, truth)
    if from_logits:
        pred = pred.log_softmax(dim=1).exp() if mode == "multiclass" else F.logsigmoid(pred).exp()
    bs, c = truth.size(0), pred.size(1)
    if mode == "binary":
        truth, pred = truth.reshape(bs, 1, -1), pred.reshape(bs, 1, -1)
        if ignore_index is not None:
            mask = truth != ignore_index
            pred, truth = pred * mask, truth * mask
    elif mode == "multiclass":
        truth, pred = truth.reshape(bs, -1), pred.reshape(bs, c, -1)
        mask = truth != ignore_index if ignore_index is not None else torch.ones_like(truth, dtype=torch.bool)
        pred = pred * mask.unsqueeze(1)
        truth = F.one_hot((truth * mask).long(), c).permute(0, 2, 1) * mask.unsqueeze(1)
    else:
        truth, pred = truth.reshape(bs, c, -1), pred.reshape(bs, c, -1)
        if ignore_index is not None:
            mask = truth != ignore_index
            pred, truth = pred * mask, truth * mask
    truth = truth.type_as(pred)
    dims = (0, 2)
    inter = (pred.sum(dims) + truth.sum(dims) - (pred - truth).abs().sum(dims)) / 2
    fp, fn = pred.sum(dims) - inter, truth.sum(dims) - inter
    score = (inter + smooth) / (inter + 0.5 * fp + 0.5 * fn + smooth).clamp_min(eps)
    loss = -torch.log(score.clamp_min(eps)) if log_loss else 1.0 - score
    loss = loss * (truth.sum(dims) > 0).to(loss.dtype)
    if classes is not None:
        loss = loss[classes]
    return loss.mean()


def smp_focal_multiclass(x, mask, alpha, gamma, ignore_index):
    """smp 0.6's FocalLoss(mode="multiclass"): per class a sigmoid focal mean over the kept pixels,
    averaged over the classes."""
    if FocalLoss is not None:
        return FocalLoss("multiclass", alpha=alpha, gamma=gamma, ignore_index=ignore_index)(x, mask)
    keep = mask != ignore_index
    losses = []
    for c in range(x.size(1)):
        t, o = (mask == c).to(x.dtype)[keep], x[:, c][keep]
        logpt = F.binary_cross_entropy_with_logits(o, t, reduction="none")
        loss = (1.0 - torch.exp(-logpt)).pow(gamma) * logpt
        if alpha is not None:
            loss = loss * (alpha * t + (1 - alpha) * (1 - t))
        losses.append(loss.mean())
    return torch.stack(losses).mean()


DEFAULTS = {
    "org.torchhost.bce_with_logits": dict(output="s:out", target="s:mask", label_smoothing="f:0.0",
                                          target_threshold="f:-1.0", pos_weight="F:", ignore_index="i:-100"),
    "org.torchhost.focal": dict(output="s:out", target="s:mask", alpha="f:0.25", gamma="f:2.0", ignore_index="i:-100"),
    "org.torchhost.dice": dict(output="s:out", target="s:mask", mode="s:multiclass", from_logits="b:true",
                               smooth="f:0.0", eps="f:1e-7", ignore_index="i:-100", log_loss="b:false", classes="I:"),
    "org.torchhost.weighted_sum": dict(losses="S:cross_entropy,dice", outputs="S:out,out", targets="S:mask,mask",
                                       weights="F:1.0,0.5", label_smoothing="f:0.0", beta="f:1.0",
                                       ignore_index="i:-100", items="s:labelled"),
}


class Cases:
    def __init__(self, directory):
        self.dir, self.cases = directory, []

    def add(self, name, component, out, target, reference, **keys):
        """reference(out64, target) -> the mean; its gradient times the plugin's count is the sum's."""
        out32 = out.to(torch.float32).contiguous()
        out32.numpy().tofile(os.path.join(self.dir, f"{name}_out.bin"))
        kind = "f32" if target.is_floating_point() else "i64"
        target = target.to(torch.float32 if kind == "f32" else torch.int64).contiguous()
        target.numpy().tofile(os.path.join(self.dir, f"{name}_target.bin"))
        config = dict(DEFAULTS[component], **{k: v for k, v in keys.items()})
        shape = lambda t: "x".join(str(d) for d in t.shape)
        line = f"{name} {component} {shape(out32)} {shape(target)} {kind} " + " ".join(f"{k}={v}" for k, v in config.items())
        self.cases.append((name, out32, target, reference, line))

    def run(self, driver, library):
        with open(os.path.join(self.dir, "cases.txt"), "w") as f:
            f.write("\n".join(c[4] for c in self.cases) + "\n")
        subprocess.run([driver, library, self.dir], check=True)
        results = {}
        for line in open(os.path.join(self.dir, "results.txt")).read().splitlines():
            name, total, count = line.split()
            results[name] = (float(total), float(count))
        for name, out32, target, reference, _ in self.cases:
            total, count = results[name]
            grad = torch.from_numpy(np.fromfile(os.path.join(self.dir, f"{name}_grad.bin"), dtype=np.float32)).double()
            x = out32.double().requires_grad_()
            expected = reference(x, target)
            (expected * count).backward()
            expected = expected.detach()
            mean = total / count if count else 0.0
            value_diff = abs(mean - float(expected)) / max(abs(float(expected)), 1e-12)
            scale = float(x.grad.abs().max()) or 1.0
            grad_diff = float((grad - x.grad.flatten()).abs().max()) / scale
            worst["value"] = max(worst["value"], value_diff)
            worst["grad"] = max(worst["grad"], grad_diff)
            ok = (value_diff <= TOL or abs(mean - float(expected)) <= 1e-9) and grad_diff <= TOL
            check(ok, f"{name}: mean {mean:.9g} (sum {total:.6g} / count {count:g}) = {float(expected):.9g}, "
                      f"rel diff {value_diff:.1e}, gradient rel diff {grad_diff:.1e}")


def valid_mean(per, keep):
    return per[keep.expand_as(per)].mean() if keep.any() else per.sum() * 0


def bce_cases(c):
    g = torch.Generator().manual_seed(41)
    x1 = torch.randn(3, 1, 12, 10, generator=g) * 3
    mask = (torch.rand(3, 12, 10, generator=g) < 0.4).long()
    void = mask.clone()
    void[torch.rand(3, 12, 10, generator=g) < 0.15] = 255

    def binary(ignore):
        def ref(x, m):
            keep = (m != ignore).unsqueeze(1)
            t = m.masked_fill(m == ignore, 0).unsqueeze(1).double()
            return valid_mean(F.binary_cross_entropy_with_logits(x, t, reduction="none"), keep)
        return ref
    c.add("bce_binary_mask", "org.torchhost.bce_with_logits", x1, mask, binary(-100))
    c.add("bce_binary_void", "org.torchhost.bce_with_logits", x1, void, binary(255), ignore_index="i:255")
    c.add("bce_binary_empty", "org.torchhost.bce_with_logits", x1, torch.zeros_like(mask), binary(-100))
    c.add("bce_binary_full", "org.torchhost.bce_with_logits", x1, torch.ones_like(mask), binary(-100))
    c.add("bce_all_ignored", "org.torchhost.bce_with_logits", x1, torch.full_like(mask, 255), binary(255),
          ignore_index="i:255")
    soft = torch.rand(3, 1, 12, 10, generator=g)
    c.add("bce_binary_float", "org.torchhost.bce_with_logits", x1, soft,
          lambda x, t: F.binary_cross_entropy_with_logits(x, t.double()))
    x3 = torch.randn(2, 3, 9, 11, generator=g) * 2
    multi = (torch.rand(2, 3, 9, 11, generator=g) < 0.3).float()
    pw = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64).view(3, 1, 1)
    c.add("bce_multilabel_pos_weight", "org.torchhost.bce_with_logits", x3, multi,
          lambda x, t: F.binary_cross_entropy_with_logits(x, t.double(), pos_weight=pw), pos_weight="F:1.0,2.0,0.5")
    ids = torch.randint(0, 3, (2, 9, 11), generator=g)
    ids[torch.rand(2, 9, 11, generator=g) < 0.2] = 255

    def onehot(x, m):
        keep = (m != 255).unsqueeze(1)
        t = F.one_hot(m.masked_fill(m == 255, 0), 3).permute(0, 3, 1, 2).double()
        return valid_mean(F.binary_cross_entropy_with_logits(x, t, reduction="none"), keep)
    c.add("bce_class_ids_void", "org.torchhost.bce_with_logits", x3, ids, onehot, ignore_index="i:255")


def focal_cases(c):
    g = torch.Generator().manual_seed(42)
    x1 = torch.randn(3, 1, 12, 10, generator=g) * 3
    mask = (torch.rand(3, 12, 10, generator=g) < 0.3).long()
    void = mask.clone()
    void[torch.rand(3, 12, 10, generator=g) < 0.15] = 255

    def binary(ignore, alpha=0.25, gamma=2.0):
        def ref(x, m):
            keep = (m != ignore).unsqueeze(1)
            t = m.masked_fill(m == ignore, 0).unsqueeze(1).double()
            return valid_mean(sigmoid_focal_loss(x, t, alpha=alpha, gamma=gamma, reduction="none"), keep)
        return ref
    c.add("focal_binary_mask", "org.torchhost.focal", x1, mask, binary(-100))
    c.add("focal_binary_void", "org.torchhost.focal", x1, void, binary(255), ignore_index="i:255")
    c.add("focal_binary_empty", "org.torchhost.focal", x1, torch.zeros_like(mask), binary(-100))
    c.add("focal_binary_full", "org.torchhost.focal", x1, torch.ones_like(mask), binary(-100))
    c.add("focal_binary_no_alpha", "org.torchhost.focal", x1, mask, binary(-100, -1.0, 1.5), alpha="f:-1.0",
          gamma="f:1.5")
    soft = (torch.rand(3, 1, 12, 10, generator=g) < 0.5).float()
    c.add("focal_binary_float", "org.torchhost.focal", x1, soft,
          lambda x, t: sigmoid_focal_loss(x, t.double(), reduction="mean"))
    x3 = torch.randn(2, 3, 9, 11, generator=g) * 2
    multi = (torch.rand(2, 3, 9, 11, generator=g) < 0.3).float()
    c.add("focal_multilabel", "org.torchhost.focal", x3, multi,
          lambda x, t: sigmoid_focal_loss(x, t.double(), alpha=0.5, gamma=3.0, reduction="mean"),
          alpha="f:0.5", gamma="f:3.0")
    xl = torch.randn(6, 5, generator=g) * 2
    tl = (torch.rand(6, 5, generator=g) < 0.4).float()
    c.add("focal_labels", "org.torchhost.focal", xl, tl, lambda x, t: sigmoid_focal_loss(x, t.double(), reduction="mean"))
    x4 = torch.randn(2, 4, 9, 11, generator=g) * 2
    ids = torch.randint(0, 4, (2, 9, 11), generator=g)
    ids[torch.rand(2, 9, 11, generator=g) < 0.2] = 255
    c.add("focal_multiclass_smp", "org.torchhost.focal", x4, ids,
          lambda x, m: smp_focal_multiclass(x, m, 0.25, 2.0, 255), ignore_index="i:255")


def dice_cases(c):
    g = torch.Generator().manual_seed(43)
    x1 = torch.randn(3, 1, 12, 10, generator=g) * 2
    mask = (torch.rand(3, 12, 10, generator=g) < 0.4).long()
    void = mask.clone()
    void[torch.rand(3, 12, 10, generator=g) < 0.15] = 255
    c.add("dice_binary", "org.torchhost.dice", x1, mask, lambda x, m: smp_dice(x, m, "binary"), mode="s:binary")
    c.add("dice_binary_void", "org.torchhost.dice", x1, void, lambda x, m: smp_dice(x, m, "binary", ignore_index=255),
          mode="s:binary", ignore_index="i:255")
    c.add("dice_binary_empty", "org.torchhost.dice", x1, torch.zeros_like(mask),
          lambda x, m: smp_dice(x, m, "binary"), mode="s:binary")
    c.add("dice_binary_full", "org.torchhost.dice", x1, torch.ones_like(mask),
          lambda x, m: smp_dice(x, m, "binary"), mode="s:binary")
    c.add("dice_binary_smooth_log", "org.torchhost.dice", x1, void,
          lambda x, m: smp_dice(x, m, "binary", smooth=1.0, ignore_index=255, log_loss=True),
          mode="s:binary", ignore_index="i:255", smooth="f:1.0", log_loss="b:true")
    x4 = torch.randn(2, 4, 9, 11, generator=g) * 2
    ids = torch.randint(0, 3, (2, 9, 11), generator=g)  # class 3 absent: adds 0
    ids[torch.rand(2, 9, 11, generator=g) < 0.2] = 255
    c.add("dice_multiclass_void", "org.torchhost.dice", x4, ids,
          lambda x, m: smp_dice(x, m, "multiclass", ignore_index=255), ignore_index="i:255")
    c.add("dice_multiclass_classes", "org.torchhost.dice", x4, ids,
          lambda x, m: smp_dice(x, m, "multiclass", ignore_index=255, smooth=0.5, classes=[1, 3]),
          ignore_index="i:255", smooth="f:0.5", classes="I:1,3")
    probs = torch.softmax(x4, 1)
    clean = torch.randint(0, 4, (2, 9, 11), generator=g)
    c.add("dice_multiclass_probs", "org.torchhost.dice", probs, clean,
          lambda x, m: smp_dice(x, m, "multiclass", from_logits=False), from_logits="b:false")
    x3 = torch.randn(2, 3, 9, 11, generator=g) * 2
    multi = (torch.rand(2, 3, 9, 11, generator=g) < 0.3).long()
    multi[torch.rand(2, 3, 9, 11, generator=g) < 0.1] = 255
    c.add("dice_multilabel_void", "org.torchhost.dice", x3, multi,
          lambda x, m: smp_dice(x, m, "multilabel", ignore_index=255), mode="s:multilabel", ignore_index="i:255")
    soft = torch.rand(2, 3, 9, 11, generator=g)
    c.add("dice_multilabel_soft", "org.torchhost.dice", x3, soft,
          lambda x, m: smp_dice(x, m.double(), "multilabel"), mode="s:multilabel")


def weighted_sum_cases(c):
    g = torch.Generator().manual_seed(44)
    x = torch.randn(2, 4, 9, 11, generator=g) * 2
    ids = torch.randint(0, 4, (2, 9, 11), generator=g)
    void = ids.clone()
    void[torch.rand(2, 9, 11, generator=g) < 0.2] = 255
    c.add("ce_dice_labelled", "org.torchhost.weighted_sum", x, void,
          lambda x, m: F.cross_entropy(x, m, ignore_index=255) + 0.5 * smp_dice(x, m, "multiclass", ignore_index=255),
          ignore_index="i:255")
    c.add("ce_dice_samples", "org.torchhost.weighted_sum", x, ids,
          lambda x, m: F.cross_entropy(x, m) + 0.5 * smp_dice(x, m, "multiclass"), items="s:samples")
    x1 = torch.randn(2, 1, 9, 11, generator=g) * 2
    fg = (torch.rand(2, 9, 11, generator=g) < 0.4).long()
    c.add("dice_binary_alone_labelled", "org.torchhost.weighted_sum", x1, fg,
          lambda x, m: smp_dice(x, m, "binary"), losses="S:dice", outputs="S:out", targets="S:mask", weights="F:1.0")


def main():
    driver, library = sys.argv[1:3]
    print(f"Dice and multiclass focal against {SMP}")
    with tempfile.TemporaryDirectory() as directory:
        cases = Cases(directory)
        bce_cases(cases)
        focal_cases(cases)
        dice_cases(cases)
        weighted_sum_cases(cases)
        cases.run(driver, library)
    print(f"largest relative difference: value {worst['value']:.1e}, gradient {worst['grad']:.1e} (tolerance {TOL:g})")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
