#include <cstdio>

#include "commands.h"
#include "run_assembly.h"
#include "session.h"
#include "weights_choice.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/error.h"
#include "tp/framework/monitor/history.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/short_number.h"

namespace tp::cli {

int run_eval(const Options& options) {
  auto session = open_session(options);
  const RunConfig& config = session->config;
  const std::filesystem::path path = session->checkpoint_file(options.checkpoint);
  const bool test = options.split == "test";
  AssembledRun run = assemble_run(*session, RunRequest{.command = "host eval",
                                                       .splits = {.train = true, .val = !test, .test = test},
                                                       .start_from = path});
  const LoadedCheckpoint& checkpoint = *run.start;
  RunComponents& parts = run.parts;
  if (test) {
    if (!parts.test_data)
      throw ConfigError("data.test", "host eval --split test needs a test split: add [data.test] (the held-out "
                                     "dataset) or set data.test_from_train = true for a dataset that serves one.");
    parts.val_data = parts.test_data; // the Trainer evaluates whatever split val_data holds
  } else if (!parts.val_data) {
    throw ConfigError("data.val", "host eval needs a validation split: add [data.val] or set data.val_from_train = true.");
  }
  // eval.strategy = "no" stops evaluation during training; asked for explicitly, it still runs.
  if (config.eval.strategy == IntervalStrategy::kNo) session->config.eval.strategy = IntervalStrategy::kEpoch;
  // Evaluation takes no training step: a graph of one (run.cuda_graphs) would only be refused
  // where the run trained elsewhere (on the GPU, evaluated here on the CPU).
  session->config.run.cuda_graphs = CudaGraphMode::kOff;
  // kEvaluate: no gradient buckets or averages, and none of training's lines (schedule, precision,
  // training order) in the log.
  Trainer trainer(config, parts, run.device, session->logger, session->run_dir, session->dist.get(),
                  TrainerUse::kEvaluate);
  // By default the weights the run monitored: best.pt of a val_ema/... monitor is its best EMA.
  const ChosenWeights weights = choose_weights(options.weights, checkpoint);
  if (!weights.note.empty()) session->logger.info(weights.note);
  restore_weights(checkpoint.weights(weights.name, "--weights"), parts.model->state());
  const Scalars metrics = trainer.evaluate(options.split);

  std::string json = "{\"checkpoint\":\"" + path.string() + "\",\"epoch\":" + std::to_string(checkpoint.epoch) +
                     ",\"step\":" + std::to_string(checkpoint.step) +
                     ",\"weights\":\"" + weights.name + "\",\"split\":\"" + options.split + "\"";
  const std::string of_weights = weights.name == "live" ? "" : "the " + weights.name + " weights of ";
  std::printf("evaluation of %s%s (epoch %lld, step %lld) on the %s split\n", of_weights.c_str(), path.c_str(),
              static_cast<long long>(checkpoint.epoch), static_cast<long long>(checkpoint.step), options.split.c_str());
  for (const auto& [name, value] : metrics) {
    std::printf("  %-20s %s\n", name.c_str(), short_number(value).c_str());
    json += ",\"" + name + "\":" + format_number(value); // read back: every digit
  }
  json += "}\n";
  // eval_best.json (val, live weights) as before; eval_best_ema.json, eval_best_test.json, ...
  const std::string suffix = (weights.name == "live" ? "" : "_" + weights.name) + (test ? "_test" : "");
  const auto out = session->run_dir / ("eval_" + path.stem().string() + suffix + ".json");
  write_file_atomically(out, json);
  std::printf("written to %s\n", out.c_str());
  // eval/best/val/accuracy, eval/best/ema/test/accuracy: one series per checkpoint and weights.
  if (options.mlflow && session->place.rank == 0)
    log_eval_to_mlflow(config.logging.mlflow, session->run_dir,
                       "eval/" + path.stem().string() + (weights.name == "live" ? "" : "/" + weights.name),
                       metrics, checkpoint.step, session->logger);
  return kExitOk;
}

}  // namespace tp::cli
