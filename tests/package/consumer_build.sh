#!/usr/bin/env bash
# Package test (fmt's find-package-test): install the product, move the install, and use it as a
# user and a third-party plugin author would, from the installed files alone (docs/build.md,
# "Installing"; docs/plugin_sdk.md):
# - the moved install runs: its host finds its built-in plugins and configs from its own location,
#   the quickstart config trains (one step: train.fast_dev_run) in an empty directory with no
#   LD_LIBRARY_PATH, and a message about host keys names the installed reference.toml; no RUNPATH
#   of ours points into the build tree or the install's first location;
# - the rules and the templates are there; the Tier S templates (a C++ callback, a C++ dataset, a
#   C11 dataset in a C-only project) build as external projects with find_package(torchhost
#   CONFIG) + torchhost_add_plugin, optimised although no build type is given, and the C++ dataset
#   trains the built-in mlp with its run.toml and serves a test split, and a copy of it that links
#   OpenCV with the template's one documented LINK line builds and loads; the Tier T template builds
#   against the LibTorch the host was built with, which the SDK remembers (CPU or CUDA, C++17 or
#   the C++20 that LibTorch 2.14 requires: CI runs this in the CPU tree and in the CUDA tree), and
#   without any LibTorch the configure stops with torchhost's paragraph; old_style_dataset/, a
#   plugin that includes <dlpack/dlpack.h> as the SDK's docs taught before DLPack was pinned as
#   tp/dlpack.h, builds with that header taken from the install (never /usr/include/dlpack, where
#   libdlpack-dev puts it). The installed host accepts all of them.
# - the inference library (docs/deployment.md section 4): libtorchhost_infer.so exports its API
#   alone; its template (classify in C++, classify_c in C11) builds from the install with
#   find_package(torchhost CONFIG) and torchhost::infer, runs with no LD_LIBRARY_PATH on an export
#   of a tiny run the installed host trained, and prints the classes and probabilities `host
#   predict --images` writes for the same files.
# Args: <build dir> [all | libtorch-only] [python]: libtorch-only (the CUDA tree) checks the install
# and what depends on the tree's LibTorch (the Tier T template, the inference library), and leaves
# the LibTorch-free templates to the default tree, where they are the same. python (default
# python3) runs the standard-library helpers beside this script.
set -euo pipefail
build=$1
scope=${2:-all} # all | libtorch-only
python=${3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=export_and_classify.sh
. "$here/export_and_classify.sh"
work="$build/test-runs/package"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd -P) # the host names its files by their real path
# Under umask 002 (a shared group's default): the install's directories must still be writable by
# their owner only, or the host refuses its own plugin directory (issue 41, item 14).
(umask 002 && cmake --install "$build" --prefix "$work/staged" >"$work/install.log")
mv "$work/staged" "$work/sdk" # relocatable: nothing may depend on the first prefix
host="$work/sdk/bin/host"

# The product: the host, its built-in plugins where it looks by default, the configs, the docs.
for file in bin/host lib/torchhost/plugins/shapes.so lib/torchhost/plugins/vision_models.so \
            share/torchhost/configs/reference.toml share/torchhost/configs/quickstart.toml \
            share/doc/torchhost/README.md share/doc/torchhost/docs/plugin_sdk.md; do
  test -f "$work/sdk/$file" || { echo "not installed: $work/sdk/$file"; exit 1; }
done
for dir in lib lib/torchhost lib/torchhost/plugins share/torchhost/configs; do
  mode=$(stat -c %a "$work/sdk/$dir")
  [ "$mode" = 755 ] || { echo "installed $dir has mode $mode under umask 002, not 755"; exit 1; }
done
for binary in "$host" "$work"/sdk/lib/torchhost/plugins/*.so "$work"/sdk/lib/libtorchhost_infer.so; do
  runpath=$(readelf -d "$binary" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p')
  if [[ "$runpath" == *"$build"* || "$runpath" == *"$work"* ]]; then
    echo "$binary: RUNPATH into the build tree or the install's first prefix: $runpath"; exit 1
  fi
done

# The quickstart from the moved install, in an empty directory, with nothing but the host's own
# location to find the plugins and the config by.
run_dir=$(mktemp -d "$work/empty.XXXXXX")
(cd "$run_dir" && env -u LD_LIBRARY_PATH -u TORCHHOST_PLUGIN_PATH "$host" \
   --config "$work/sdk/share/torchhost/configs/quickstart.toml" --set train.fast_dev_run=true) |
  tee "$work/quickstart.out"
grep -q 'val/accuracy' "$work/quickstart.out" || { echo "the installed quickstart did not evaluate"; exit 1; }
# A message about host keys names the reference.toml that exists in this install.
set +e
(cd "$run_dir" && "$host" --config no_such.toml) 2>"$work/missing.err"
set -e
reference="$work/sdk/share/torchhost/configs/reference.toml"
grep -qF "$reference lists every key" "$work/missing.err" ||
  { echo "the message does not name $reference:"; cat "$work/missing.err"; exit 1; }

# What plugin_api/README.md and docs/plugin_sdk.md point at is installed under share/torchhost.
share="$work/sdk/share/torchhost"
for file in README.md templates/tier_s_callback/CMakeLists.txt templates/tier_s_callback/README.md \
            templates/tier_t_model/CMakeLists.txt templates/tier_t_model/template_model.cpp \
            templates/tier_s_c_dataset/CMakeLists.txt templates/tier_s_c_dataset/c_dataset.c \
            templates/tier_s_c_dataset/README.md templates/tier_s_cpp_dataset/CMakeLists.txt \
            templates/tier_s_cpp_dataset/template_dataset.cpp templates/tier_s_cpp_dataset/README.md \
            templates/tier_s_cpp_dataset/run.toml templates/tier_t_model/run.toml; do
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
# Compiled through ccache where the tree is (cmake/TorchhostCcache.cmake's settings): the Tier T
# template alone is a LibTorch TU of about 30 s without a precompiled header, in each tree that runs
# this; with base_dir at the checkout, CI's fresh clone takes it from the cache the working checkout
# filled (docs/build.md, "CI and the compiler cache"). What is tested is the SDK, not the compiler.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$(cd "$here/../.." && pwd) CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
  export CCACHE_SLOPPINESS=time_macros,include_file_mtime,include_file_ctime
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
build_consumer() {
  local src=$1 name=$2 prefix=${3:-$work/sdk}
  cmake -S "$src" -B "$src-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}"
  grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$src-build/CMakeCache.txt" ||
    { echo "$name: the build type did not default to Release"; exit 1; }
  cmake --build "$src-build" --verbose | tee "$src-build/build.out"
  grep -q -- ' -O3 ' "$src-build/build.out" || { echo "$name: compiled without -O3"; exit 1; }
  local plugin="$src-build/$name.so"
  test -f "$plugin" || { echo "expected $plugin"; exit 1; }
  local exports
  exports=$(nm -D --defined-only "$plugin" | awk '{print $3}' | grep -v '^$' | sort -u)
  [ "$exports" = "tp_entry" ] || { echo "$name: unexpected exports: $exports"; exit 1; }
  "$host" plugins check "$plugin"
}

# The LibTorch-free plugins (Tier S in C++ and in C, the older include style, OpenCV): the same
# in every tree, so only a tree that is not "libtorch-only" builds them (the CUDA tree checks
# what depends on its LibTorch: the install above and the Tier T template below).
if [ "$scope" = all ]; then
cp -r "$share/templates/tier_s_callback" "$work/consumer"
build_consumer "$work/consumer" template_callback

# A plugin that links a shared library of its own project, shipped as docs/plugin_sdk.md says
# (plugin trial F14): installed into a plugin directory with the library in lib/ below it, which
# the host does not scan; torchhost_add_plugin gives the plugin RUNPATH $ORIGIN/lib on install, so
# the moved directory works.
cp -r "$share/templates/tier_s_callback" "$work/own_lib"
echo 'int acme_util_answer() { return 42; }' >"$work/own_lib/acme_util.cpp"
printf 'int acme_util_answer();\nint uses_util_answer() { return acme_util_answer(); }\n' >"$work/own_lib/uses_util.cpp"
sed -i 's|torchhost_add_plugin(template_callback TIER S SOURCES template_callback.cpp)|add_library(acme_util SHARED acme_util.cpp)\ntorchhost_add_plugin(template_callback TIER S SOURCES template_callback.cpp uses_util.cpp LINK acme_util)\ninstall(TARGETS template_callback LIBRARY DESTINATION plugins)\ninstall(TARGETS acme_util LIBRARY DESTINATION plugins/lib)|' \
  "$work/own_lib/CMakeLists.txt"
grep -q 'LINK acme_util' "$work/own_lib/CMakeLists.txt" ||
  { echo "own_lib: the template's torchhost_add_plugin line changed; update this test"; exit 1; }
build_consumer "$work/own_lib" template_callback
cmake --install "$work/own_lib-build" --prefix "$work/own_lib-staged" >/dev/null
mv "$work/own_lib-staged" "$work/own_lib-shipped"
runpath=$(readelf -d "$work/own_lib-shipped/plugins/template_callback.so" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p')
[ "$runpath" = '$ORIGIN/lib' ] || { echo "own_lib: installed RUNPATH is '$runpath', not \$ORIGIN/lib"; exit 1; }
"$host" plugins list --plugin-dir "$work/own_lib-shipped/plugins" | grep 'org.example.print_callback' >/dev/null ||
  { echo "own_lib: the shipped plugin directory does not load"; exit 1; }
"$host" plugins check "$work/own_lib-shipped/plugins/template_callback.so"

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
# Each header the object depends on, as an absolute path (with ccache's base_dir the depfile names
# them relative to the build directory).
deps=$(cd "$work/old_style-build" && ninja -t deps | awk '/^    /{print $1}' | xargs realpath -m)
for header in "$work/sdk/include/torchhost/compat/dlpack/dlpack.h" "$work/sdk/include/tp/dlpack.h"; do
  grep -qF "$header" <<<"$deps" || { echo "old_style_dataset: did not compile against $header:"; echo "$deps"; exit 1; }
done
if grep -q '/usr/include/dlpack/' <<<"$deps"; then
  echo "old_style_dataset: <dlpack/dlpack.h> came from the system, not the SDK:"; echo "$deps"; exit 1
fi

# The C++ dataset template: built, checked, and trained by the built-in mlp with its run.toml (the
# README's five-minute plugin); the model must learn it, and `host eval --split test` reads its
# test split (kHasTestSplit).
cp -r "$share/templates/tier_s_cpp_dataset" "$work/cpp_dataset"
build_consumer "$work/cpp_dataset" template_dataset
(cd "$work/cpp_dataset" && "$host" --config run.toml --plugin-dir "$work/cpp_dataset-build") 2>&1 |
  tee "$work/cpp_dataset.out"
accuracy=$(sed -n 's/.*finished.*val\/accuracy=\([0-9.]*\).*/\1/p' "$work/cpp_dataset.out")
awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 0.99) }' ||
  { echo "template_dataset: the mlp reached val/accuracy=${accuracy:-none}, expected >= 0.99"; exit 1; }
(cd "$work/cpp_dataset" && "$host" eval --config runs/blobs/config.toml --checkpoint best --split test \
   --plugin-dir "$work/cpp_dataset-build") 2>&1 | tee "$work/cpp_dataset_test.out"
grep -q 'test/accuracy' "$work/cpp_dataset_test.out" || { echo "template_dataset: no test split evaluated"; exit 1; }

# An OpenCV dataset from the C++ dataset template, as its CMakeLists.txt says (issue 43): the one
# LINK line and nothing else, no find_package(OpenCV) and no include directory; it must compile
# against <opencv2/imgcodecs.hpp>, link under -z defs and load in `plugins check`.
cp -r "$share/templates/tier_s_cpp_dataset" "$work/cv_dataset"
cat >"$work/cv_dataset/cv_probe.cpp" <<'CPP'
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <vector>

// A PNG round trip through OpenCV, as a dataset's decode is.
bool cv_probe_round_trip() {
  cv::Mat image(4, 4, CV_8UC3, cv::Scalar(10, 20, 30)), grey;
  std::vector<unsigned char> png;
  if (!cv::imencode(".png", image, png)) return false;
  cv::cvtColor(cv::imdecode(png, cv::IMREAD_COLOR), grey, cv::COLOR_BGR2GRAY);
  return grey.rows == 4;
}
CPP
sed -i 's|torchhost_add_plugin(template_dataset TIER S SOURCES template_dataset.cpp)|torchhost_add_plugin(template_dataset TIER S SOURCES template_dataset.cpp cv_probe.cpp\n                     LINK opencv_core opencv_imgproc opencv_imgcodecs)|' \
  "$work/cv_dataset/CMakeLists.txt"
grep -q 'LINK opencv_core opencv_imgproc opencv_imgcodecs' "$work/cv_dataset/CMakeLists.txt" ||
  { echo "cv_dataset: the template's torchhost_add_plugin line changed; update this test"; exit 1; }
build_consumer "$work/cv_dataset" template_dataset
# grep reads all of ldd's output: `grep -q` stops at the match, ldd then dies of SIGPIPE and
# pipefail failed the check now and then while the library was there.
ldd "$work/cv_dataset-build/template_dataset.so" | grep 'libopencv_imgcodecs' >/dev/null ||
  { echo "cv_dataset: not linked against libopencv_imgcodecs"; exit 1; }
fi

# The Tier T template: a LibTorch plugin, configured as docs/plugin_sdk.md tells a plugin author,
# with the SDK alone on CMAKE_PREFIX_PATH: the SDK remembers the LibTorch the host was built with.
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -f "$torch_dir/TorchConfig.cmake" ] || { echo "no Torch_DIR in $build/CMakeCache.txt"; exit 1; }
cp -r "$share/templates/tier_t_model" "$work/t_consumer"
build_consumer "$work/t_consumer" template_model
grep -qF "Torch_DIR:PATH=$torch_dir" "$work/t_consumer-build/CMakeCache.txt" ||
  { echo "template_model: not built against the host's LibTorch $torch_dir"; exit 1; }
# Its run.toml trains it on the C dataset template (built above where the scope is all) to a
# validation loss near zero (the template's README, plugin trial F15).
if [ "$scope" = all ]; then
  (cd "$work/t_consumer" && "$host" --config run.toml --plugin-dir "$work/t_consumer-build" \
     --plugin-dir "$work/c_consumer-build") 2>&1 | tee "$work/t_consumer.out"
  loss=$(sed -n 's/.*finished.*val\/loss=\([0-9.e+-]*\).*/\1/p' "$work/t_consumer.out")
  awk -v l="${loss:-1}" 'BEGIN { exit !(l < 1e-6) }' ||
    { echo "template_model: its run.toml reached val/loss=${loss:-none}, expected < 1e-6"; exit 1; }
fi

# Without a LibTorch (none named, the remembered one gone) the configure stops with torchhost's
# paragraph, which gives the CMAKE_PREFIX_PATH to add, quoted.
cp -r "$share/templates/tier_t_model" "$work/t_no_torch"
if cmake -S "$work/t_no_torch" -B "$work/t_no_torch-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/sdk" \
     -DTORCHHOST_HOST_TORCH_DIR="$work/no_libtorch" >"$work/t_no_torch.out" 2>&1; then
  echo "template_model configured without any LibTorch"; exit 1
fi
expected="-DCMAKE_PREFIX_PATH=\"$work/sdk;\$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')\""
# CMake wraps long messages: compare with the line breaks and indentation taken out.
flat=$(tr -d '\n' <"$work/t_no_torch.out" | tr -s ' ')
for part in "torchhost: no LibTorch found." "$work/no_libtorch, which is not there any more" "$expected"; do
  grep -qF -- "$part" <<<"$flat" || { echo "template_model without LibTorch: no '$part' in:"; cat "$work/t_no_torch.out"; exit 1; }
done
if grep -q 'Could not find a package configuration file provided by "Torch"' "$work/t_no_torch.out"; then
  echo "template_model without LibTorch: CMake's generic message, not torchhost's"; exit 1
fi

# The inference library from the install. Its exports: the C API and the tp::infer classes, nothing
# of the framework or of what LibTorch's headers instantiate.
library="$work/sdk/lib/libtorchhost_infer.so"
test -f "$work/sdk/include/tp/infer/model.h" -a -f "$work/sdk/include/tp/infer/infer.h" -a -f "$library" ||
  { echo "the inference library or its headers are not installed"; exit 1; }
leaked=$(nm -D --defined-only "$library" | awk '{print $3}' | c++filt |
  grep -Ev '^(tp_infer_[a-z_]+|tp::infer::.*|(typeinfo|typeinfo name|vtable) for tp::infer::Error)$' || true)
[ -z "$leaked" ] || { echo "libtorchhost_infer.so exports more than its API:"; echo "$leaked" | head -20; exit 1; }
# What it needs: the training's plots, TensorBoard and MLflow code is not in it (--gc-sections), nor
# the libraries of those (docs/deployment.md, "What to ship").
needed=$(readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
unwanted=$(echo "$needed" | grep -E '^lib(plplot|png|curl)' || true)
[ -z "$unwanted" ] || { echo "libtorchhost_infer.so needs training-only libraries:"; echo "$unwanted"; exit 1; }
# A tiny run trained, exported and predicted by the installed host (its own plugins, found from its
# location), long enough that it tells the two classes apart (export_and_classify.sh).
infer="$work/infer"
train_export_predict "$host" "$infer" infer 5 6 3
# The template, copied out and built as a user builds it: no LibTorch named, the SDK alone.
cp -r "$share/templates/infer_classify" "$work/infer_classify"
cmake -S "$work/infer_classify" -B "$work/infer_classify-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/sdk" "${launcher[@]}"
cmake --build "$work/infer_classify-build"
classify_like_predict "$work/infer_classify-build" "$infer"
[ "$(cut -f2 "$infer/classify.out" | sort -u | tr '\n' ' ')" = "dark light " ] ||
  { echo "classify: expected both classes, dark and light, by name"; exit 1; }
