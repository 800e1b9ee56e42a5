"""timm oracle for optim.layer_decay (timm's --layer-decay, timm.optim.param_groups_layer_decay).

layer_decay_driver (C++) builds the host's optimizer over resnet.so's ResNet-<depth>, whose
parameter names are torchvision's and timm's, from the depths the plugin declares (tp.model/1
@since 1.4). Here timm builds the same model and its layer-decay groups; every parameter must get
lr = 0.1 x the group's lr_scale (to 1e-12 relative: the host multiplies 0.1 by decay^k, timm
keeps the scale apart) and the same weight decay (0.05 on tensors with dim >= 2, else 0), and both
sides must list the same parameters. Needs timm in .venv-bench (scripts/bench_setup); exits 77
(SKIP) naming the reason without it.
Usage: layer_decay_oracle.py <layer_decay_driver> <plugin dir>
"""
import subprocess
import sys

try:
    import timm
    from timm.optim import param_groups_layer_decay
except ImportError as error:
    print(f"SKIP: timm is not importable ({error}); run scripts/bench_setup")
    sys.exit(77)

LR, WEIGHT_DECAY = 0.1, 0.05


def host_groups(driver, plugin_dir, depth, decay):
    out = subprocess.run([driver, plugin_dir, str(depth), str(decay)], check=True, capture_output=True, text=True)
    groups = {}
    for line in out.stdout.splitlines():
        name, lr, weight_decay = line.split()
        groups[name] = (float.fromhex(lr), float.fromhex(weight_decay))
    return groups


def timm_groups(depth, decay):
    model = timm.create_model(f"resnet{depth}", pretrained=False, num_classes=10)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {}
    for group in param_groups_layer_decay(model, weight_decay=WEIGHT_DECAY, layer_decay=decay):
        for p in group["params"]:
            groups[names[id(p)]] = (LR * group["lr_scale"], group["weight_decay"])
    return groups


def main():
    driver, plugin_dir = sys.argv[1], sys.argv[2]
    failures = 0
    for depth, decay in [(18, 0.75), (50, 0.65), (18, 1.0)]:
        host, want = host_groups(driver, plugin_dir, depth, decay), timm_groups(depth, decay)
        if set(host) != set(want):
            print(f"resnet{depth} decay {decay}: parameter sets differ: host only {sorted(set(host) - set(want))[:5]}, "
                  f"timm only {sorted(set(want) - set(host))[:5]}")
            failures += 1
            continue
        bad = [n for n in want if abs(host[n][0] - want[n][0]) > 1e-12 * want[n][0] or host[n][1] != want[n][1]]
        for name in bad[:5]:
            print(f"resnet{depth} decay {decay}: {name}: host lr {host[name][0]!r} wd {host[name][1]}, "
                  f"timm lr {want[name][0]!r} wd {want[name][1]}")
        failures += len(bad)
        scales = sorted({round(v[0] / LR, 12) for v in want.values()})
        print(f"resnet{depth} decay {decay}: {len(want)} parameters, {len(scales)} lr scales "
              f"({scales[0]:.6g} .. {scales[-1]:.6g}), {len(bad)} differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
