#include <nlohmann/json.hpp>

#include <cstdio>

#include "commands.h"
#include "run_assembly.h"
#include "session.h"
#include "start_agreement.h"
#include "weights_choice.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/config_changes.h"
#include "tp/framework/config/write.h"
#include "tp/framework/engine/checkpoint_evaluation.h"
#include "tp/framework/error.h"
#include "tp/framework/tracking/mlflow_tracker.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/output_target.h"
#include "tp/framework/util/short_number.h"

namespace tp::cli {
namespace {

// eval_<checkpoint>.json: one object, what was evaluated and then the values. The library escapes
// the path (a quote or a backslash in it broke the hand-written text) and writes each double so
// that it reads back as the same number; bytes of a path that are not UTF-8 are replaced (U+FFFD).
// `changes`: how this evaluation's configuration differs from the one the checkpoint trained with
// (another annotation file, batch size or transform gives other numbers for the same weights).
std::string eval_json(const std::filesystem::path& path, const LoadedCheckpoint& checkpoint,
                      const std::string& weights, const std::string& split, const std::vector<std::string>& changes,
                      const Scalars& metrics) {
  nlohmann::ordered_json json;
  json["checkpoint"] = path.string();
  json["epoch"] = checkpoint.epoch;
  json["step"] = checkpoint.step;
  json["weights"] = weights;
  json["split"] = split;
  json["config_changes"] = changes;
  for (const auto& [name, value] : metrics) json[name] = value;
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

int run_eval(const Options& options) {
  auto session = open_session(options);
  // Every rank evaluates with rank 0's configuration (another batch size, transform or metric
  // option would sum other shards' values into one result), checked as `host train` checks it.
  agree_on_config(session->dist.get(), session->config);
  const RunConfig& config = session->config;
  const std::filesystem::path path = session->checkpoint_file(options.checkpoint);
  const bool test = options.split == "test";
  // The evaluated split alone: no training split is prepared or created.
  AssembledRun run = assemble_run(*session, RunRequest{.command = "host eval",
                                                       .splits = {.train = false, .val = !test, .test = test},
                                                       .start_from = path});
  const LoadedCheckpoint& checkpoint = *run.start;
  RunComponents& parts = run.parts;
  if (test && !parts.test_data)
    throw ConfigError("data.test", "host eval --split test needs a test split: add [data.test] (the held-out "
                                   "dataset) or set data.test_from_train = true for a dataset that serves one.");
  if (!test && !parts.val_data)
    throw ConfigError("data.val", "host eval needs a validation split: add [data.val] or set data.val_from_train = true.");
  // Its labels must mean the classes the model was trained on (a checkpoint from before ABI 1.12 names none).
  check_same_classes(config, checkpoint.classes, nullptr, test ? parts.test_data.get() : parts.val_data.get(),
                     options.split);
  // By default the weights the run monitored: best.pt of a val_ema/... monitor is its best EMA.
  const ChosenWeights weights = choose_weights(options.weights, checkpoint);
  // eval_best.json (val, live weights) as before; eval_best_ema.json, eval_best_test.json, ...
  // --output elsewhere (evaluating on other data keeps the run's own record), refused before the
  // evaluation when it cannot be written (a directory, a FIFO).
  const std::string suffix = (weights.name == "live" ? "" : "_" + weights.name) + (test ? "_test" : "");
  const std::filesystem::path out = options.output.empty()
                                        ? session->run_dir / ("eval_" + path.stem().string() + suffix + ".json")
                                        : std::filesystem::path(options.output);
  if (!options.output.empty()) check_output_file(out, "--output", "the evaluation results");
  if (!weights.note.empty()) session->logger.info(weights.note);
  const Scalars metrics =
      evaluate_checkpoint(config, parts, {test ? parts.test_data : parts.val_data, options.split},
                          checkpoint.weights(weights.name, "--weights"), run.device, *run.collectives, session->logger);
  if (session->place.rank != 0) return kExitOk; // every rank holds the same values; one prints and writes them

  const std::string of_weights = weights.name == "live" ? "" : "the " + weights.name + " weights of ";
  std::printf("evaluation of %s%s (epoch %lld, step %lld) on the %s split\n", of_weights.c_str(), path.c_str(),
              static_cast<long long>(checkpoint.epoch), static_cast<long long>(checkpoint.step), options.split.c_str());
  for (const auto& [name, value] : metrics) std::printf("  %-20s %s\n", name.c_str(), short_number(value).c_str());
  const std::vector<std::string> changes = config_changes(checkpoint.config_toml, to_toml_text(config.resolved));
  if (!changes.empty()) {
    std::printf("  configured otherwise than the checkpoint's training:\n");
    for (const std::string& change : changes) std::printf("    %s\n", change.c_str());
  }
  write_file_atomically(out, eval_json(path, checkpoint, weights.name, options.split, changes, metrics));
  std::printf("written to %s\n", out.c_str());
  // eval/best/val/accuracy, eval/best/ema/test/accuracy: one series per checkpoint and weights.
  if (options.mlflow)
    log_eval_to_mlflow(config.logging.mlflow, session->run_dir,
                       "eval/" + path.stem().string() + (weights.name == "live" ? "" : "/" + weights.name),
                       metrics, checkpoint.step, session->logger);
  return kExitOk;
}

}  // namespace tp::cli
