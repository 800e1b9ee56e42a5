// `host predict` (docs/predict.md): a checkpoint's outputs for every sample of one split, or of the
// files --images names (read as the val split, predict_images.h), one row per sample in dataset
// order, written by rank 0 as the ranks produce them.
#include <cstdio>
#include <optional>

#include "commands.h"
#include "predict_images.h"
#include "run_assembly.h"
#include "session.h"
#include "weights_choice.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/engine/loader_options.h"
#include "tp/framework/engine/predictor.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"
#include "tp/framework/util/file_lock.h"
#include "tp/framework/util/stale_temporaries.h"

namespace tp::cli {
namespace {

// A run whose loss is a binary cross entropy trained each label's own sigmoid (multi-label
// tagging, or timm's BCE recipe): its predictions say each label's probability.
bool trained_with_sigmoids(const RunConfig& config) { return config.loss.component == "org.torchhost.bce_with_logits"; }

}  // namespace


int run_predict(const Options& options) {
  // First: a stop signal (kStopSignals: SIGINT, SIGTERM, SIGHUP...) stops at the next round and
  // removes the partial file (predictor.cpp), never kills the process halfway through a write.
  install_stop_signal_handlers();
  auto session = open_session(options);
  // --images: the run's evaluation table reads the files as its val split; rows and files are named "images".
  ImageFiles images;
  std::optional<ComponentConfig> images_table;
  if (!options.images.empty()) {
    images = list_image_files(options.images, image_extensions(session->config, session->registry));
    if (!images.left_out.empty()) session->logger.warn(images.left_out);
    images_table = val_table_reading(session->config, images);
  }
  const std::string read_split = options.images.empty() ? options.split : "val";
  const std::string named = options.images.empty() ? options.split : "images";
  const RunConfig& config = session->config;
  const std::filesystem::path path = session->checkpoint_file(options.checkpoint);
  const DatasetSplits splits{.train = read_split == "train", .val = read_split == "val", .test = read_split == "test"};
  AssembledRun run = assemble_run(*session, RunRequest{.command = "host predict",
                                                       .splits = splits,
                                                       .start_from = path,
                                                       .stopped_note = "; nothing was written.",
                                                       .val_table = std::move(images_table)});
  const LoadedCheckpoint& checkpoint = *run.start;
  const c10::Device device = run.device;
  RunComponents& parts = run.parts;
  const std::shared_ptr<DatasetProxy> split =
      read_split == "train" ? parts.train_data : read_split == "val" ? parts.val_data : parts.test_data;
  if (!split)
    throw ConfigError("data." + options.split,
                      "host predict --split " + options.split + ": the run has no " + options.split + " split; add [data." +
                          options.split + "] or set data." + options.split + "_from_train = true.");
  // A trial's detector predicted --split train and found 14 of 20 rows' boxes on mirrored images,
  // though predict.md says so: the run says it too.
  if (read_split == "train")
    session->logger.warn("host predict --split train reads the training split as training does, augmentation "
                         "included (flips, crops and jitter drawn from each sample's seed): its rows describe "
                         "augmented images, not the files as they are. Predict --split val or test, or --images, for "
                         "the files themselves.");
  // Its labels must mean the classes the model was trained on (--images' files carry none).
  if (options.images.empty()) check_same_classes(config, checkpoint.classes, nullptr, split.get(), options.split);

  const BatchPlacement placement(device, config.run.channels_last);
  const std::vector<StateTensor> state = placement.place_model(*parts.model);
  // By default the weights the run monitored (weights_choice.h), as host eval.
  const ChosenWeights chosen = choose_weights(options.weights, checkpoint);
  if (!chosen.note.empty()) session->logger.info(chosen.note);
  restore_weights(checkpoint.weights(chosen.name, "--weights"), state);

  const bool rank0 = session->place.rank == 0;
  std::filesystem::path output = options.output;
  if (output.empty()) {
    const std::string weights = chosen.name == "live" ? "" : "_" + chosen.name;
    // Test-time augmentation gives other numbers: its own file, not over the plain predictions.
    const std::string tta = options.tta.empty() ? "" : "_tta-" + options.tta;
    // --format png writes a directory, named without an extension.
    output = session->run_dir / ("predictions_" + named + "_" + path.stem().string() + weights + tta +
                                 (options.format == "png" ? "" : "." + options.format));
  }
  if (rank0) {
    // What killed predictions (or training) left, *.partial-<pid> and the like of dead pids: in
    // the run directory and, for an --output elsewhere, in that file's directory. Not the run
    // directory while a training holds its run.lock: that training's pid may be one this process
    // cannot see (another node of a shared file system, another container), and its live
    // temporaries then looked left behind (security trial F19: the training died at its rename).
    std::vector<std::filesystem::path> removed;
    if (lock_held_elsewhere(session->run_dir / "run.lock"))
      session->logger.info("host predict: a training holds " + (session->run_dir / "run.lock").string() +
                           ", so the run directory's leftover temporaries are left for it to sweep");
    else
      removed = sweep_stale_temporaries(session->run_dir, /*levels=*/3);
    const std::filesystem::path output_dir = output.has_parent_path() ? output.parent_path() : ".";
    if (output_dir != session->run_dir)
      for (std::filesystem::path& path : sweep_stale_temporaries(output_dir, /*levels=*/0)) removed.push_back(path);
    for (const std::filesystem::path& path : removed)
      session->logger.info("removed " + path.string() + ", left by a process that no longer runs");
  }
  std::unique_ptr<PredictionWriter> writer = rank0 ? PredictionWriter::open(output, options.format) : nullptr;
  // The names training kept in the checkpoint; a checkpoint from before them takes the split's own.
  if (writer) writer->set_class_names(!checkpoint.classes.empty() ? checkpoint.classes.names : split->class_names().names);
  // --images names its rows by the files as given; a split by what its dataset names each sample (ABI 1.13).
  if (writer) writer->set_row_paths(options.images.empty() ? split->sample_keys() : images.shown);
  Collectives& collectives = *run.collectives;
  // The run's evaluation loader (engine/loader_options.h): eval.batch_size, every sample once.
  const LoaderOptions loader = loader_options(config, evaluation_batch_size(config), LoaderMode::kEvalExact,
                                              collectives.rank(), collectives.world_size(), device);
  Progress progress(config.progress.mode, config.progress.every_seconds, rank0);
  const PredictSummary summary = predict(*parts.model, split, loader, placement,
                                         PredictOptions{split_list(options.outputs), options.tta == "hflip", options.format == "png",
                                                        options.format == "jsonl", trained_with_sigmoids(config)},
                                         writer.get(), progress, collectives);
  // Every rank names the samples it left out (the error names the file): "1 samples were skipped"
  // alone sent a trial looking for which.
  if (!summary.skipped_here.empty()) {
    // warn() would print on rank 0 alone.
    session->logger.every_rank(with_skipped_samples("predict: samples left out (data.on_bad_sample = \"skip\"; their "
                                                    "rows are missing), the first of this rank's:",
                                                    summary.skipped_here));
  }
  if (!rank0) return kExitOk;
  writer->finish(summary.schema);
  std::string columns;
  for (std::size_t k = 0; k < summary.schema.size(); ++k) {
    const std::string& name = summary.schema[k].name;
    columns += (columns.empty() ? "" : ", ") + name;
    if (k == 0 && writer->names_paths()) columns += ", path";
    if (writer->names_classes(summary.schema, k)) columns += ", " + name.substr(0, name.rfind('.')) + ".class";
  }
  // A detector's ragged outputs are written too, as arrays in each line: name them with the columns.
  for (const std::string& array : summary.arrays) columns += (columns.empty() ? "" : ", ") + array + " (array per line)";
  if (options.format == "png") columns += std::string(columns.empty() ? "" : ", ") + "and <index>.png class maps";
  const std::string of_weights = chosen.name == "live" ? "" : "the " + chosen.name + " weights of ";
  const std::string of_what =
      options.images.empty() ? "of the " + options.split + " split" : "of --images " + options.images;
  std::printf("predictions of %s%s (epoch %lld, step %lld) for %lld samples %s%s\n  columns: %s\n"
              "written to %s\n",
              of_weights.c_str(), path.c_str(),
              static_cast<long long>(checkpoint.epoch), static_cast<long long>(checkpoint.step),
              static_cast<long long>(summary.rows), of_what.c_str(), options.tta == "hflip" ? " (hflip TTA)" : "",
              columns.c_str(), output.c_str());
  if (summary.skipped > 0) {
    // The log names only the first few of each rank's (DataLoader::kKeptSkips): "the log names
    // them" sent a trial grepping for 144 files among 5 lines (data trial F5).
    const int64_t named = static_cast<int64_t>(summary.skipped_here.size());
    const std::string which =
        collectives.world_size() > 1
            ? "the log names each rank's first " + std::to_string(DataLoader::kKeptSkips) + " at most"
        : named >= summary.skipped ? std::string(summary.skipped == 1 ? "the log names it" : "the log names them")
                                   : "the log names the first " + std::to_string(named) + " of them";
    std::printf("  %lld %s skipped (data.on_bad_sample = \"skip\"): their rows are missing (%s)\n",
                static_cast<long long>(summary.skipped), summary.skipped == 1 ? "sample was" : "samples were",
                which.c_str());
  }
  return kExitOk;
}

}  // namespace tp::cli
