"""torchvision oracle for mix.so (org.torchhost.mixup, cutmix, mixup_cutmix).

mix_oracle_driver (C++) applies the plugin through its C ABI to fixed random batches and writes
the inputs, the outputs and the parameters the seed gave (mix_params.h: lambda, whether CutMix,
the box). Here torchvision 0.29's transforms.v2.MixUp / CutMix apply those same parameters
through their own `transform(inpt, params)` (the code their forward runs after make_params), and
every output must be bitwise equal: images and labels, Mixup and CutMix, and the batches
mixup_cutmix leaves unmixed (images unchanged, labels one-hot).
Needs .venv-bench (torchvision does not import with the project venv's torch); run_bench_oracle.sh
exits 77 (SKIP) without it. Usage: mix_oracle.py <mix_oracle_driver> <mix.so>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torchvision.transforms import v2


def load(path, dtype, shape):
    return torch.from_numpy(np.fromfile(path, dtype=dtype).reshape(shape))


def main():
    driver, plugin = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([driver, plugin, out], check=True)
        with open(os.path.join(out, "cases.txt")) as f:
            header = f.readline().split()
            b, c, h, w, classes = (int(header[i]) for i in (1, 3, 5, 7, 9))
            rows = [line.split() for line in f if line.strip()]
        counts = {"mixup": 0, "cutmix": 0, "unmixed": 0}
        for index, component, seed, applied, cutmix, lam, x1, y1, x2, y2 in rows:
            stem = os.path.join(out, "case" + index)
            x = load(stem + "_x.bin", np.float32, (b, c, h, w))
            y = load(stem + "_y.bin", np.int64, (b,))
            out_x = load(stem + "_out_x.bin", np.float32, (b, c, h, w))
            out_y = load(stem + "_out_y.bin", np.float32, (b, classes))
            where = f"case {index} ({component}, seed {seed})"
            if applied == "0":
                expected_x = x
                expected_y = torch.nn.functional.one_hot(y, classes).float()
                counts["unmixed"] += 1
            elif cutmix == "1":
                t = v2.CutMix(num_classes=classes)
                params = {"labels": y, "batch_size": b, "box": (int(x1), int(y1), int(x2), int(y2)),
                          "lam_adjusted": float(lam)}
                expected_x, expected_y = t.transform(x, params), t.transform(y, params)
                counts["cutmix"] += 1
            else:
                t = v2.MixUp(num_classes=classes)
                params = {"labels": y, "batch_size": b, "lam": float(lam)}
                expected_x, expected_y = t.transform(x, params), t.transform(y, params)
                counts["mixup"] += 1
            dx = (out_x - expected_x).abs().max().item()
            dy = (out_y - expected_y).abs().max().item()
            if not (torch.equal(out_x, expected_x) and torch.equal(out_y, expected_y)):
                print(f"FAIL {where}: max |diff| images {dx}, labels {dy}")
                return 1
        print(f"all {len(rows)} cases bitwise equal to torchvision {__import__('torchvision').__version__} "
              f"(mixup {counts['mixup']}, cutmix {counts['cutmix']}, unmixed {counts['unmixed']})")
        if min(counts.values()) == 0:
            print("FAIL: a kind of case did not occur: " + str(counts))
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(main())
