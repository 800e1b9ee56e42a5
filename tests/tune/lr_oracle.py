"""Oracle of `host tune lr` (docs/tune.md): the series the host recorded, checked against
fastai's and Lightning's lr finders.

Usage: lr_oracle.py LR_FIND_CSV HISTORY_JSONL MIN_LR MAX_LR STEPS [LR_FIND_CSV HISTORY_JSONL ...]...
(one sweep per five arguments; one Python start for all, as importing lightning takes seconds)

- lr column: the history's lr of every step equals the CSV's, and both are the exact geometric
  sweep min_lr * (max_lr / min_lr) ** (k / (steps - 1)): min_lr itself at step 1 and, when the
  sweep ran to its end, max_lr itself at the last step.
- smoothing: the CSV's smoothed loss is the bias-corrected exponential average (beta 0.98) of the
  history's train/loss; the sweep stops at the first point whose smoothed loss exceeds 4 x the
  best before it (or is not finite), and only there.
- suggestion: fastai's "valley" rule on the CSV's lr and smoothed-loss columns, cut as
  Learner.lr_find cuts them, picks the row the host marked. fastai itself is not installed (it
  pulls spaCy and more into the oracle venv); `valley` and the cut below are fastai 2.7's
  (fastai/callback/schedule.py, `valley` and `Learner.lr_find`), copied verbatim but for names.
- reference: lightning.pytorch.tuner.lr_finder._LRFinder.suggestion() on the CSV's lrs and its
  raw losses smoothed as Lightning's _LRCallback smooths them (its bias correction divides by
  1 - beta ** (global_step + 1), global_step having advanced already: `lightning_smoothing`
  below, Lightning 2.6.6's on_train_batch_end); the host prints its step, which the test compares
  with `lightning_step`. Without lightning installed
  (scripts/bench_setup installs 2.6.6 into .venv-bench) the reimplementation below is used:
  Lightning 2.6.6's _LRFinder.suggestion (lightning/pytorch/tuner/lr_finder.py, lines 162-196),
  copied verbatim but for `self`.

Prints "ok index=N lr=X rows=R diverged=B lightning=<VERSION | reimplementation>
lightning_step=S" per sweep; any mismatch raises.
"""
import csv
import json
import math
import sys

import torch


def valley(lrs, losses, num_it):
    """fastai 2.7 fastai.callback.schedule.valley, verbatim; returns (lr, index)."""
    n = len(losses)
    max_start, max_end = 0, 0

    # find the longest valley
    lds = [1] * n
    for i in range(1, n):
        for j in range(0, i):
            if (losses[i] < losses[j]) and (lds[i] < lds[j] + 1):
                lds[i] = lds[j] + 1
            if lds[max_end] < lds[i]:
                max_end = i
                max_start = max_end - lds[max_end]

    sections = (max_end - max_start) / 3
    idx = max_start + int(sections) + int(sections / 2)

    return float(lrs[idx]), idx


def fastai_suggestion(all_lrs, all_losses, num_it):
    """fastai 2.7 Learner.lr_find's cut ([num_it//10:-5], then up to the first NaN) and valley;
    returns the index into the full series, or None when nothing is left."""
    lrs, losses = torch.tensor(all_lrs[num_it // 10:-5]), torch.tensor(all_losses[num_it // 10:-5])
    nan_idxs = torch.nonzero(torch.isnan(losses.view(-1)))
    if len(nan_idxs) > 0:
        drop_idx = min(nan_idxs)
        lrs = lrs[:drop_idx]
        losses = losses[:drop_idx]
    if len(losses) == 0:
        return None
    _, idx = valley(lrs, losses, num_it)
    return num_it // 10 + (idx % len(losses))  # idx may be -1, which Python's lrs[idx] wraps


def suggestion_reimplemented(results, skip_begin=10, skip_end=1):
    """Lightning 2.6.6 _LRFinder.suggestion, verbatim but for `self`; returns (lr, index)."""
    losses = torch.tensor(results["loss"][skip_begin:-skip_end])
    lrs = torch.tensor(results["lr"][skip_begin:-skip_end])
    is_finite = torch.isfinite(losses)
    losses = losses[is_finite]
    lrs = lrs[is_finite]

    if len(losses) < 2:
        return None, None

    gradients = torch.gradient(losses, spacing=[lrs])[0]  # Compute the gradient of losses w.r.t. learning rates
    min_grad = torch.argmin(gradients).item()
    all_losses_idx = torch.arange(len(results["loss"]))
    idx_non_skipped = all_losses_idx[skip_begin:-skip_end]
    idx_finite = idx_non_skipped[is_finite]
    optimal_idx = idx_finite[min_grad].item()
    return results["lr"][optimal_idx], optimal_idx


def lightning_smoothing(losses, beta=0.98):
    """Lightning 2.6.6 _LRCallback.on_train_batch_end's smoothed losses of a series (k-th loss:
    global_step is k when it smooths)."""
    avg_loss, out = 0.0, []
    for k, current_loss in enumerate(losses, start=1):
        avg_loss = beta * avg_loss + (1 - beta) * current_loss
        out.append(avg_loss / (1 - beta ** (k + 1)))
    return out


def suggestion(lr_min, lr_max, steps, results):
    try:
        import lightning
        from lightning.pytorch.tuner.lr_finder import _LRFinder
    except ImportError:
        lr, idx = suggestion_reimplemented(results)
        return lr, idx, "reimplementation"
    finder = _LRFinder("exponential", lr_min, lr_max, steps)
    finder.results = results
    lr = finder.suggestion()
    return lr, finder._optimal_idx, "lightning-" + lightning.__version__


def number(text):
    return float(text) if text != "" else math.nan


def check(csv_path, history_path, lr_min, lr_max, steps):
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, "lr_find.csv has no rows"
    lrs = [number(r["lr"]) for r in rows]
    losses = [number(r["loss"]) for r in rows]
    smoothed = [number(r["smoothed_loss"]) for r in rows]
    marked = [i for i, r in enumerate(rows) if r["suggested"] == "1"]
    assert [int(r["step"]) for r in rows] == list(range(1, len(rows) + 1)), "steps are not 1..n"

    history = {}
    with open(history_path) as f:
        for line in f:
            if not line.endswith("\n"):
                continue  # the record the stopped child was writing
            record = json.loads(line)
            if record.get("kind") == "step":
                history[int(record["step"])] = record
    assert len(history) >= len(rows), f"history has {len(history)} steps, the CSV {len(rows)}"

    # The lr column: the history's (what the optimizer trained with) is the CSV's, and geometric.
    for k, lr in enumerate(lrs):
        assert history[k + 1]["lr"] == lr, f"step {k + 1}: history lr {history[k + 1]['lr']!r}, CSV {lr!r}"
        expected = lr_min * (lr_max / lr_min) ** (k / (steps - 1))
        assert abs(lr - expected) <= 1e-12 * expected, f"step {k + 1}: lr {lr!r} is not geometric ({expected!r})"
    assert lrs[0] == lr_min, f"the first lr is {lrs[0]!r}, not {lr_min!r}"
    if len(rows) == steps:
        assert lrs[-1] == lr_max, f"the last lr is {lrs[-1]!r}, not {lr_max!r}"
    for k in range(1, len(lrs)):
        ratio = (lr_max / lr_min) ** (1 / (steps - 1))
        assert abs(lrs[k] / lrs[k - 1] - ratio) <= 1e-12 * ratio, f"step {k + 1}: ratio {lrs[k] / lrs[k - 1]!r}"

    # Smoothing and the stop rule, recomputed from the history's raw losses.
    average, best, diverged_at = 0.0, 0.0, None
    for k in range(len(rows)):
        raw = history[k + 1]["train/loss"]
        raw = math.nan if raw is None else raw
        assert (math.isnan(raw) and math.isnan(losses[k])) or raw == losses[k], f"step {k + 1}: loss differs"
        average = 0.98 * average + 0.02 * raw
        value = average / (1 - 0.98 ** (k + 1))
        if math.isfinite(value):
            assert abs(smoothed[k] - value) <= 1e-12 * abs(value), f"step {k + 1}: smoothed {smoothed[k]!r}, {value!r}"
        else:
            assert math.isnan(smoothed[k]), f"step {k + 1}: smoothed {smoothed[k]!r} should be empty"
        if not math.isfinite(value) or (k > 0 and value > 4 * best):
            diverged_at = k
            break
        if k == 0 or value < best:
            best = value
    if diverged_at is not None:
        assert diverged_at == len(rows) - 1, f"diverged at row {diverged_at} but the sweep went on to {len(rows) - 1}"
    else:
        assert len(rows) == steps, f"stopped after {len(rows)} of {steps} steps without diverging"

    idx = fastai_suggestion(lrs, smoothed, steps)
    if idx is None:
        assert not marked, f"the host marked row {marked} where fastai's rule has no suggestion"
    else:
        assert marked == [idx], f"the host marked rows {marked}, fastai's valley index {idx} (lr {lrs[idx]!r})"
    lightning_lr, lightning_idx, oracle = suggestion(lr_min, lr_max, steps,
                                                     {"lr": lrs, "loss": lightning_smoothing(losses)})
    if lightning_idx is not None:
        assert lrs[lightning_idx] == lightning_lr
    print(f"ok index={idx} lr={None if idx is None else lrs[idx]!r} rows={len(rows)} "
          f"diverged={diverged_at is not None} lightning={oracle} "
          f"lightning_step={None if lightning_idx is None else lightning_idx + 1}")


def main():
    args = sys.argv[1:]
    assert args and len(args) % 5 == 0, "usage: lr_oracle.py CSV HISTORY MIN_LR MAX_LR STEPS [...]"
    for i in range(0, len(args), 5):
        check(args[i], args[i + 1], float(args[i + 2]), float(args[i + 3]), int(args[i + 4]))


if __name__ == "__main__":
    main()
