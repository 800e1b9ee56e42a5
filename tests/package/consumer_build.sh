#!/usr/bin/env bash
# Package test (fmt's find-package-test): install the plugin SDK and use it as a third-party plugin
# author would, from the installed files alone: the rules and the templates are there; the Tier S
# templates (a C++ callback, a C11 dataset in a C-only project) build as external projects with
# find_package(torchhost CONFIG) + torchhost_add_plugin, optimised although no build type is given;
# so does the Tier T template against the LibTorch this build used (CPU or CUDA, C++17 or the C++20
# that LibTorch 2.14 requires: CI runs this in the CPU tree and in the CUDA tree); and so does
# old_style_dataset/, a plugin that includes <dlpack/dlpack.h> as the SDK's docs taught before DLPack
# was pinned as tp/dlpack.h, with that header taken from the install (never /usr/include/dlpack,
# where libdlpack-dev puts it). The host accepts all of them. Args: <build dir>.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
work="$build/test-runs/package"
rm -rf "$work"
cmake --install "$build" --prefix "$work/sdk"

# What plugin_api/README.md and docs/plugin_sdk.md point at is installed under share/torchhost.
share="$work/sdk/share/torchhost"
for file in README.md templates/tier_s_callback/CMakeLists.txt templates/tier_s_callback/README.md \
            templates/tier_t_model/CMakeLists.txt templates/tier_t_model/template_model.cpp \
            templates/tier_s_c_dataset/CMakeLists.txt templates/tier_s_c_dataset/c_dataset.c \
            templates/tier_s_c_dataset/README.md; do
  test -f "$share/$file" || { echo "not installed: $share/$file"; exit 1; }
done
grep -q "PLG-4" "$share/README.md" || { echo "$share/README.md lacks the PLG rules"; exit 1; }
# Every adapter the README documents is installed with the headers.
for header in model_adapter.h dataset_adapter.h callback_adapter.h batch_transform_adapter.h loss_adapter.h \
              metric_adapter.h fields.h adapter.h random.h image_classifier.h; do
  test -f "$work/sdk/include/tp/cpp/$header" || { echo "not installed: include/tp/cpp/$header"; exit 1; }
done

# build_consumer <source dir> <name>: configure (no CMAKE_BUILD_TYPE) and build it; check that it
# was built as Release with optimisation and exports exactly one symbol, tp_entry (PLG-1).
build_consumer() {
  local src=$1 name=$2 prefix=${3:-$work/sdk}
  cmake -S "$src" -B "$src-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix"
  grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$src-build/CMakeCache.txt" ||
    { echo "$name: the build type did not default to Release"; exit 1; }
  cmake --build "$src-build" --verbose | tee "$src-build/build.out"
  grep -q -- ' -O3 ' "$src-build/build.out" || { echo "$name: compiled without -O3"; exit 1; }
  local plugin="$src-build/$name.so"
  test -f "$plugin" || { echo "expected $plugin"; exit 1; }
  local exports
  exports=$(nm -D --defined-only "$plugin" | awk '{print $3}' | grep -v '^$' | sort -u)
  [ "$exports" = "tp_entry" ] || { echo "$name: unexpected exports: $exports"; exit 1; }
  "$build/bin/host" plugins check "$plugin"
}

cp -r "$share/templates/tier_s_callback" "$work/consumer"
build_consumer "$work/consumer" template_callback

# The C template: C11 only (the project enables no C++ compiler), with TP_STABLE_BUILD_INFO_INIT.
cp -r "$share/templates/tier_s_c_dataset" "$work/c_consumer"
grep -q 'TP_STABLE_BUILD_INFO_INIT' "$work/c_consumer/c_dataset.c" || { echo "c_dataset.c: no TP_STABLE_BUILD_INFO_INIT"; exit 1; }
grep -q 'project(c_dataset LANGUAGES C)' "$work/c_consumer/CMakeLists.txt" || { echo "the C template is not a C-only project"; exit 1; }
build_consumer "$work/c_consumer" c_dataset

# Source compatibility: a plugin in the older include style (<dlpack/dlpack.h>) builds against the
# install. Ninja's record of the headers the compiler read proves where that header came from:
# the SDK's forwarding header and the DLPack it pins, whether or not libdlpack-dev is installed.
cp -r "$here/old_style_dataset" "$work/old_style"
build_consumer "$work/old_style" old_style_dataset
deps=$(ninja -C "$work/old_style-build" -t deps)
for header in "$work/sdk/include/torchhost/compat/dlpack/dlpack.h" "$work/sdk/include/tp/dlpack.h"; do
  grep -qF "$header" <<<"$deps" || { echo "old_style_dataset: did not compile against $header:"; echo "$deps"; exit 1; }
done
if grep -q '/usr/include/dlpack/' <<<"$deps"; then
  echo "old_style_dataset: <dlpack/dlpack.h> came from the system, not the SDK:"; echo "$deps"; exit 1
fi

# The Tier T template: a LibTorch plugin, configured as docs/plugin_sdk.md tells a plugin author,
# with the SDK and the LibTorch the host was built with on CMAKE_PREFIX_PATH (a wheel's
# torch.utils.cmake_prefix_path, here read back from the build's cache).
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -f "$torch_dir/TorchConfig.cmake" ] || { echo "no Torch_DIR in $build/CMakeCache.txt"; exit 1; }
cp -r "$share/templates/tier_t_model" "$work/t_consumer"
build_consumer "$work/t_consumer" template_model "$work/sdk;$(dirname "$torch_dir")"
