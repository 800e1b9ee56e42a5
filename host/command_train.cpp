#include <cstdio>

#include "commands.h"
#include "session.h"
#include "tp/framework/config/write.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/util/atomic_file.h"

namespace tp::cli {

int run_train(const Options& options) {
  auto session = open_session(options);
  const RunConfig& config = session->config;
  Logger& log = session->logger;
  log.open_file(session->run_dir / "train.log");
  const std::string config_text = to_toml_text(config.resolved);
  write_file_atomically(session->run_dir / "config.toml", config_text);
  log.info("run '" + config.run.name + "' from " + config.source + " -> " + session->run_dir.string());
  log.file_only("resolved config:\n" + config_text);

  const CpuSettings cpu = apply_cpu_settings(static_cast<int>(config.run.threads), static_cast<int>(config.data.num_workers));
  log.info(cpu.describe());
  const c10::Device device = resolve_device(config.run.device);

  RunComponents parts = create_components(config, session->registry);
  Trainer trainer(config, parts, device, log, session->run_dir);
  const FitSummary summary = trainer.fit();

  std::string result;
  for (const auto& [name, value] : summary.last_eval) result += " " + name + "=" + std::to_string(value);
  log.info("finished " + std::to_string(summary.epochs) + " epochs (" + std::to_string(summary.steps) + " steps) in " +
           std::to_string(summary.seconds) + " s;" + result + (summary.stopped_early ? " (stopped early)" : ""));
  const auto dir = session->run_dir.string();
  std::printf(
      "\nOutputs in %s/\n  config.toml            resolved configuration\n  train.log              log\n"
      "  history.csv, .jsonl    per-epoch and per-step history\n"
      "  checkpoints/last.pt    last epoch; checkpoints/best.pt: best %s\n",
      dir.c_str(), config.checkpoint.monitor.c_str());
  return 0;
}

}  // namespace tp::cli
