#include <cstdio>

#include "commands.h"
#include "session.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"

namespace tp::cli {

int run_eval(const Options& options) {
  auto session = open_session(options);
  const RunConfig& config = session->config;
  std::filesystem::path path = options.checkpoint;
  if (options.checkpoint == "best" || options.checkpoint == "last")
    path = session->run_dir / "checkpoints" / (options.checkpoint + ".pt");
  const LoadedCheckpoint checkpoint = load_checkpoint(path);

  apply_cpu_settings(static_cast<int>(config.run.threads), static_cast<int>(config.data.num_workers));
  const c10::Device device = session->device(); // cuda:LOCAL_RANK under data-parallel evaluation
  session->logger.info(apply_determinism(config.run.deterministic, device));
  RunComponents parts = create_components(config, session->registry);
  if (!parts.val_data)
    throw ConfigError("data.val", "host eval needs a validation split: add [data.val] or set data.val_from_train = true.");
  Trainer trainer(config, parts, device, session->logger, session->run_dir, session->dist.get());
  restore_weights(checkpoint.weights(options.weights, "--weights"), parts.model->state());
  const Scalars metrics = trainer.evaluate();

  std::string json = "{\"checkpoint\":\"" + path.string() + "\",\"epoch\":" + std::to_string(checkpoint.epoch) +
                     ",\"step\":" + std::to_string(checkpoint.step) +
                     ",\"weights\":\"" + options.weights + "\"";
  std::printf("evaluation of %s%s (epoch %lld, step %lld)\n", options.weights == "live" ? "" : "the ema weights of ",
              path.c_str(), static_cast<long long>(checkpoint.epoch), static_cast<long long>(checkpoint.step));
  for (const auto& [name, value] : metrics) {
    std::printf("  %-20s %.6f\n", name.c_str(), value);
    json += ",\"" + name + "\":" + std::to_string(value);
  }
  json += "}\n";
  const std::string suffix = options.weights == "live" ? "" : "_" + options.weights;
  const auto out = session->run_dir / ("eval_" + path.stem().string() + suffix + ".json");
  write_file_atomically(out, json);
  std::printf("written to %s\n", out.c_str());
  return kExitOk;
}

}  // namespace tp::cli
