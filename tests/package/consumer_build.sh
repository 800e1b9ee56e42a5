#!/usr/bin/env bash
# Package test (fmt's find-package-test): install the plugin SDK, build the Tier S template as an
# external project with find_package(torchhost CONFIG) + torchhost_add_plugin, and have the host
# accept the result. Args: <build dir> <source dir>.
set -euo pipefail
build=$1
source=$2
work="$build/test-runs/package"
rm -rf "$work"
cmake --install "$build" --prefix "$work/sdk"
cp -r "$source/plugins/template/tier_s_callback" "$work/consumer"
cmake -S "$work/consumer" -B "$work/consumer-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/sdk"
cmake --build "$work/consumer-build"
plugin="$work/consumer-build/template_callback.so"
test -f "$plugin" || { echo "expected $plugin"; exit 1; }
# Exactly one exported symbol: tp_entry (PLG-1, enforced by the version script).
exports=$(nm -D --defined-only "$plugin" | awk '{print $3}' | grep -v '^$' | sort -u)
[ "$exports" = "tp_entry" ] || { echo "unexpected exports: $exports"; exit 1; }
"$build/bin/host" plugins check "$plugin"
