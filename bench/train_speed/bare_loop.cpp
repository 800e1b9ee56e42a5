// The reference for "host overhead" (bench/train_speed, case a): a hand-written LibTorch training
// loop with nothing of the Trainer in it, on the same model, optimizer, tensors and process
// settings as the host run it is compared with.
//
//   train_speed_bare --config FILE [--set KEY=VALUE]... [--plugin-dir DIR]... --data FILE
//                    [--steps 60] [--window 10]
//
// What it shares with the host: the run config (same file and --set values), the model, created
// through the framework's plugin loading (Registry, create_components; the same ModelProxy the
// Trainer calls), the optimizer (make_optimizer on [optim]: the same fused kernel), autocast
// (amp.precision), and apply_cpu_settings (intra-op threads = run.threads, glibc malloc
// thresholds raised), so any difference is the Trainer's own work. What it leaves out: the data
// loader (batches are pre-collated once from the tensor_pool file, cycled in order), the loss
// plugin (at::cross_entropy_loss, mean), loss accounting, the non-finite check, the schedule,
// history, progress and callbacks. CPU only.
//
// Output: one line "bare steps_per_s=<1/median window step time> windows=<n>"; the first window
// is warm-up and is left out, as the driver does with the host's history.
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/amp/precision.h"
#include "tp/framework/config/load.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/util/log.h"

namespace {

struct Args {
  std::string config, data;
  std::vector<std::string> sets, plugin_dirs;
  int steps = 60, window = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + k);
    const std::string v = argv[++i];
    if (k == "--config") a.config = v;
    else if (k == "--data") a.data = v;
    else if (k == "--set") a.sets.push_back(v);
    else if (k == "--plugin-dir") a.plugin_dirs.push_back(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--window") a.window = std::stoi(v);
    else throw std::runtime_error("unknown option " + k);
  }
  if (a.config.empty() || a.data.empty()) throw std::runtime_error("--config and --data are required");
  return a;
}

// The pool file of make_tensors.py, cut into whole batches (one copy each, made before timing).
std::vector<std::pair<at::Tensor, at::Tensor>> load_batches(const std::string& path, int64_t batch,
                                                            int64_t channels, int64_t size) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + path);
  const int64_t bytes = in.tellg();
  const int64_t per_sample = channels * size * size * 4 + 8;
  const int64_t count = bytes / per_sample;
  in.seekg(0);
  at::Tensor images = at::empty({count, channels, size, size}, at::kFloat);
  at::Tensor labels = at::empty({count}, at::kLong);
  in.read(static_cast<char*>(images.data_ptr()), count * (per_sample - 8));
  in.read(static_cast<char*>(labels.data_ptr()), count * 8);
  if (!in || count < batch) throw std::runtime_error(path + ": short file or fewer samples than one batch");
  std::vector<std::pair<at::Tensor, at::Tensor>> out;
  for (int64_t b = 0; b + batch <= count; b += batch)
    out.emplace_back(images.slice(0, b, b + batch).clone(), labels.slice(0, b, b + batch).clone());
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  tp::Logger log;
  tp::HostServices host(log, tp::ProcessPlace{});
  tp::Registry registry(host);
  tp::RunConfig config = tp::load_run_config(args.config, args.sets, tp::process_environment());
  registry.load_search_path(tp::plugin_search_path(args.plugin_dirs, {}, "", tp::builtin_plugin_dir()));
  tp::resolve_components(config, registry);
  // The host passes data.num_workers here; with run.threads set explicitly it only matters for
  // the log line, so the thread count is the host's.
  tp::apply_cpu_settings(static_cast<int>(config.run.threads), static_cast<int>(config.data.num_workers));

  tp::RunComponents parts = tp::create_components(config, registry, tp::DatasetSplits{.train = false, .val = false});
  parts.model->to_device(c10::Device(c10::kCPU), c10::kFloat);
  parts.model->set_training(true);
  tp::BuiltOptimizer optim = tp::make_optimizer(config.optim, parts.model->state());
  const tp::Precision precision = config.amp.precision;

  const auto& data = config.data.train.options; // the tensor_pool table: its shape keys
  const int64_t channels = data["channels"].value_or(int64_t{3});
  const int64_t size = data["image_size"].value_or(int64_t{64});
  const auto batches = load_batches(args.data, config.train.batch_size, channels, size);

  std::vector<double> window_s;
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < args.steps; ++step) {
    const auto& [x, y] = batches[static_cast<size_t>(step) % batches.size()];
    at::Tensor loss;
    {
      tp::AutocastGuard autocast(c10::DeviceType::CPU, precision);
      const tp::NamedTensors out = parts.model->forward({{"image", x}, {"label", y}});
      loss = at::cross_entropy_loss(out.front().second.to(at::kFloat), y);
    }
    loss.backward();
    optim.optimizer->step();
    optim.optimizer->zero_grad(/*set_to_none=*/true);
    if ((step + 1) % args.window == 0) {
      const auto now = std::chrono::steady_clock::now();
      window_s.push_back(std::chrono::duration<double>(now - start).count() / args.window);
      start = now;
    }
  }
  std::vector<double> timed(window_s.begin() + std::min<size_t>(1, window_s.size()), window_s.end());
  if (timed.empty()) throw std::runtime_error("--steps must cover at least two --window windows");
  std::nth_element(timed.begin(), timed.begin() + timed.size() / 2, timed.end());
  std::printf("bare steps_per_s=%.4f windows=%zu\n", 1.0 / timed[timed.size() / 2], timed.size());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_speed_bare: %s\n", e.what());
  return 1;
}
