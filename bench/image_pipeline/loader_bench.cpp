// The host side of bench/image_pipeline: images/s of the framework's DataLoader reading the
// image_folder plugin (--root) or the webdataset plugin (--shards), with the same
// random_resized_crop + hflip + normalise a torchvision pipeline applies (python_pipeline.py),
// nothing else running.
//
//   image_pipeline_bench (--root DIR | --shards PATTERN) [--workers 2] [--batch 64] [--size 224]
//                        [--epochs 2] [--open-only 1] [--plugin-dir DIR]... [--set data.train.KEY=VALUE]...
//
// The dataset is created exactly as `host train` creates it (a run config, the plugin registry,
// create_components), in a process set up as `host train` sets itself up (apply_cpu_settings: the
// malloc thresholds that keep freed pixel buffers in the heap, the intra-op threads left beside
// the loader's), then one DataLoader with shuffling and seeded augmentation. Epoch 0 warms up
// (page cache, allocator, OpenCV); each later epoch is timed from start_epoch() to its last batch,
// which includes starting the worker threads and filling the prefetch queue, as a training epoch
// does. Output: "host images_per_s=<median over the timed epochs> epochs=<n>".
//
// --open-only 1: no loading; times the train split's prepare (ABI 1.5: a cache's index, built or
// found) and create, each once, in this fresh process. Output: "host prepare_s=<s> create_s=<s>
// samples=<n> groups=<n>" (groups: the sample groups the dataset declares, ABI 1.10).
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "tp/framework/config/load.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

namespace {

struct Args {
  std::string root, shards;
  std::vector<std::string> sets, plugin_dirs;
  int workers = 2, batch = 64, size = 224, epochs = 2;
  bool open_only = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + k);
    const std::string v = argv[++i];
    if (k == "--root") a.root = v;
    else if (k == "--shards") a.shards = v;
    else if (k == "--open-only") a.open_only = v == "1";
    else if (k == "--workers") a.workers = std::stoi(v);
    else if (k == "--batch") a.batch = std::stoi(v);
    else if (k == "--size") a.size = std::stoi(v);
    else if (k == "--epochs") a.epochs = std::stoi(v);
    else if (k == "--set") a.sets.push_back(v);
    else if (k == "--plugin-dir") a.plugin_dirs.push_back(v);
    else throw std::runtime_error("unknown option " + k);
  }
  if (a.root.empty() == a.shards.empty() || a.epochs < 1)
    throw std::runtime_error("one of --root and --shards is required and --epochs must be >= 1");
  return a;
}

// torchvision's ImageNet statistics, as python_pipeline.py's Normalize. The model and loss are
// only there because a run config needs them; they are created but never called.
std::string run_toml(const Args& a) {
  const std::string source = a.shards.empty()
                                 ? "component = \"org.torchhost.image_folder\"\nroot = \"" + a.root + "\"\n"
                                 : "component = \"org.torchhost.webdataset\"\nshards = \"" + a.shards + "\"\n";
  return "[run]\nseed = 1\n[data]\nval_from_train = false\n[data.train]\n" + source +
         "random_resized_crop = [" + std::to_string(a.size) + "]\nhflip = 0.5\n"
         "mean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\n"
         "[model]\ncomponent = \"org.torchhost.mlp\"\n[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n";
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  (void)tp::apply_cpu_settings(/*requested_threads=*/0, args.workers);
  tp::Logger log;
  tp::HostServices host(log, tp::ProcessPlace{});
  tp::Registry registry(host);
  tp::RunConfig config = tp::load_run_config_from_string(run_toml(args), "image_pipeline_bench", args.sets,
                                                         tp::process_environment());
  registry.load_search_path(tp::plugin_search_path(args.plugin_dirs, {}, "", tp::builtin_plugin_dir()));
  tp::resolve_components(config, registry);
  if (args.open_only) {
    using Clock = std::chrono::steady_clock;
    const tp::ComponentConfig& table = *tp::dataset_table(config, "train");
    const tp::ComponentEntry entry = registry.find(table.component, TP_KIND_DATASET, table.key_path);
    const auto start = Clock::now();
    tp::DatasetProxy::prepare(entry, table, "train");
    const auto prepared = Clock::now();
    const tp::DatasetProxy data(entry, table, "train");
    const auto created = Clock::now();
    std::printf("host prepare_s=%.4f create_s=%.4f samples=%llu groups=%zu\n",
                std::chrono::duration<double>(prepared - start).count(),
                std::chrono::duration<double>(created - prepared).count(),
                static_cast<unsigned long long>(data.size()), data.sample_groups().size());
    return 0;
  }
  // As `host train` does before creating the datasets (a cache's index, where one is asked for).
  tp::prepare_datasets(config, registry, tp::DatasetSplits{true, false, false}, 0, nullptr);
  tp::RunComponents parts = tp::create_components(config, registry);

  tp::DataLoader loader(parts.train_data, tp::LoaderOptions()
                                              .batch_size(args.batch)
                                              .num_workers(args.workers)
                                              .shuffle(true)
                                              .seed(1));
  std::vector<double> rates;
  for (int epoch = 0; epoch <= args.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    loader.start_epoch(static_cast<uint64_t>(epoch));
    int64_t images = 0;
    // An empty batch (every sample skipped) counts no images.
    while (auto batch = loader.next()) images += batch->empty() ? 0 : batch->front().second.size(0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (epoch > 0) rates.push_back(static_cast<double>(images) / s);
  }
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  std::printf("host images_per_s=%.2f epochs=%zu\n", rates[rates.size() / 2], rates.size());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "image_pipeline_bench: %s\n", e.what());
  return 1;
}
