#!/usr/bin/env bash
# Package test of the install components (docs/build.md, "Components"), each installed alone into
# a prefix of its own and moved, as a deployment box or a plugin author installs it (deployment
# trial F1, F13):
# - `--component runtime` holds a usable inference library: its headers compile by themselves as C11
#   and C++17 (the ABI headers they include come with them), find_package(torchhost CONFIG) gives
#   torchhost::infer and TORCHHOST_PLUGIN_DIR without the plugin SDK, and the infer_classify
#   template it installs builds from it and classifies the files of an export that the runtime's own
#   host trained and wrote, as `host predict --images` does;
# - `--component sdk` holds no template it cannot build (infer_classify comes with the library), and
#   its package config still gives torchhost_add_plugin (the C dataset template configures).
# The templates' behaviour from a full install is consumer_build.sh's.
# Args: <build dir> [python] (python3 by default) runs the standard-library helpers beside this script.
set -euo pipefail
build=$1
python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=export_and_classify.sh
. "$here/export_and_classify.sh"
work="$build/test-runs/package_components"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd -P)

for component in runtime sdk; do
  cmake --install "$build" --prefix "$work/staged" --component "$component" >"$work/install_$component.log"
  mv "$work/staged" "$work/$component" # relocatable: nothing may depend on the first prefix
done
runtime="$work/runtime"
sdk="$work/sdk"

# The runtime: the library, its headers and what they include, the package config, the template.
for file in lib/libtorchhost_infer.so include/tp/infer/infer.h include/tp/infer/model.h include/tp/status.h \
            include/tp/macros.h lib/cmake/torchhost/torchhostConfig.cmake lib/cmake/torchhost/torchhostConfigVersion.cmake \
            lib/cmake/torchhost/torchhostInferTargets.cmake share/torchhost/templates/infer_classify/CMakeLists.txt \
            bin/host lib/torchhost/plugins/image_folder.so; do
  test -f "$runtime/$file" || { echo "runtime: not installed: $file"; exit 1; }
done
printf '#include "tp/infer/infer.h"\nint main(void) { return tp_infer_version() == 0; }\n' >"$work/c_caller.c"
cc -std=c11 -pedantic -Werror -I "$runtime/include" -c "$work/c_caller.c" -o "$work/c_caller.o" ||
  { echo "runtime: tp/infer/infer.h does not compile from the runtime's include/ alone"; exit 1; }
printf '#include "tp/infer/model.h"\nint main() { return tp::infer::version().empty(); }\n' >"$work/cpp_caller.cpp"
c++ -std=c++17 -Werror -I "$runtime/include" -c "$work/cpp_caller.cpp" -o "$work/cpp_caller.o" ||
  { echo "runtime: tp/infer/model.h does not compile from the runtime's include/ alone"; exit 1; }

# A tiny run trained and exported by the runtime's own host, its images predicted by host predict.
data="$work/data"
train_export_predict "$runtime/bin/host" "$data" components 1 4 2

# The template from the runtime alone, as deployment.md section 4 tells: configure, build, classify.
cp -r "$runtime/share/torchhost/templates/infer_classify" "$work/infer_classify"
cmake -S "$work/infer_classify" -B "$work/infer_classify-build" -G Ninja -DCMAKE_PREFIX_PATH="$runtime" \
  -DCMAKE_BUILD_TYPE=Release >"$work/infer_classify.configure" 2>&1 || { cat "$work/infer_classify.configure"; exit 1; }
cmake --build "$work/infer_classify-build" >"$work/infer_classify.build" 2>&1 || { cat "$work/infer_classify.build"; exit 1; }
classify_like_predict "$work/infer_classify-build" "$data"

# The SDK: no template it cannot build, and its package still works without the runtime's files.
[ ! -e "$sdk/share/torchhost/templates/infer_classify" ] ||
  { echo "sdk: installs infer_classify, which needs the inference library it does not hold"; exit 1; }
[ ! -e "$sdk/lib/libtorchhost_infer.so" ] || { echo "sdk: installs the inference library"; exit 1; }
for template in tier_s_callback tier_s_cpp_dataset tier_s_c_dataset tier_t_model; do
  test -f "$sdk/share/torchhost/templates/$template/CMakeLists.txt" || { echo "sdk: no template $template"; exit 1; }
done
cp -r "$sdk/share/torchhost/templates/tier_s_c_dataset" "$work/c_dataset"
cmake -S "$work/c_dataset" -B "$work/c_dataset-build" -G Ninja -DCMAKE_PREFIX_PATH="$sdk" >"$work/c_dataset.configure" 2>&1 ||
  { cat "$work/c_dataset.configure"; exit 1; }
# The template copied from the runtime, pointed at the SDK alone, says what to install instead.
if cmake -S "$work/infer_classify" -B "$work/infer_classify-sdk" -G Ninja -DCMAKE_PREFIX_PATH="$sdk" \
     >"$work/infer_classify_sdk.out" 2>&1; then
  echo "infer_classify configured against the SDK alone"; exit 1
fi
grep -q -- "--component runtime" "$work/infer_classify_sdk.out" ||
  { echo "infer_classify against the SDK: no word of the runtime:"; cat "$work/infer_classify_sdk.out"; exit 1; }
echo "components: runtime and sdk each usable alone"
