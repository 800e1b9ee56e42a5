// `host predict`'s loop (docs/predict.md): the model's outputs for every sample of one split,
// one row per sample in dataset order, streamed to a PredictionWriter.
//
// Data-parallel runs are exact without padding: each rank reads its stride of the split
// (LoaderMode::kEvalExact, unshuffled: rank r holds r, r+W, r+2W, ...), so round k of batches over
// all ranks covers the dataset indices [kBW, (k+1)BW) exactly once. Every round, the ranks'
// records travel to rank 0 (an all_gather of sizes, then one of bytes), which merges, sorts them by
// index and appends them at the start of the next round, inside the round's agreement
// (Collectives::first_failure): a rank whose columns differ stops every rank with one message.
// Every forward sees B samples: a short batch (a rank's last, or samples skipped) is padded with
// copies of its last sample, whose rows are dropped, because kernels may round differently per
// batch size (oneDNN convolutions do on AVX-512), and the ranks' last batches are shorter than one
// process's. So the file of W ranks is the file of one process, byte for byte, and rank 0 holds
// one round (B x W rows) at a time, never the split.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/prediction_writer.h"
#include "tp/framework/monitor/progress.h"
#include "tp/framework/plugin/model_proxy.h"

namespace tp {

class Collectives;

struct PredictOptions {
  std::vector<std::string> outputs; ///< model outputs to write, in this order; empty = every output
  bool tta_hflip = false;           ///< average each floating output with that of the mirrored input
  /// --format png: each row carries the PNG class map of one dense output (the one `outputs`
  /// names, else "out", else the first dense one) as its attachment, at the size of the image
  /// file it labels (pixel_maps.h); the row itself holds the index and the per-sample fields only.
  bool class_maps = false;
  /// --format jsonl: a model's ragged outputs (detections: "<name>" with "<name>_offsets") are
  /// written into each sample's line as arrays, and by default only they; other formats refuse them.
  /// Per-pixel outputs (pixel_maps.h) too: each sample's map as nested arrays of its own size.
  /// Other formats write a per-pixel output as a column while every map has one size, and refuse
  /// (ConfigError on --format) at the first that differs.
  bool json_rows = false;
  /// The model was trained with independent sigmoids (a binary cross entropy: multi-label
  /// tagging): a classification output's rows also give `<name>.sigmoid` [C], each label's
  /// probability, and `<name>.predicted` [C], 1 where it is above 0.5; `<name>.prob` is then the
  /// top label's sigmoid, not a softmax.
  bool sigmoid_scores = false;
};

struct PredictSummary {
  int64_t rows = 0;     ///< samples written (all ranks)
  int64_t skipped = 0;  ///< samples left out under data.on_bad_sample = "skip" (all ranks)
  /// The first samples this rank left out, with the error each raised (the file it names)
  std::vector<SkippedSample> skipped_here;
  PredictionSchema schema;
  /// ragged (detections) or per-pixel (segmentation) outputs written as JSON arrays in each jsonl line
  std::vector<std::string> arrays;
};

/// [all ranks] Runs the model (in eval mode, under inference mode, in float32 as `host eval`)
/// over `split` and writes one row per sample to `writer` (rank 0's; null on other ranks):
/// "index", the chosen outputs, for a classification output (named "logits" or "*_logits",
/// [N, C]) "<name>.argmax" and "<name>.prob" (the softmax probability of the argmax), and every
/// field of the sample that holds one value per sample (a label, an id) under its own name.
/// `loader_options` must be LoaderMode::kEvalExact without shuffling. `collectives` are the job's
/// (the identity for a single process). Throws ConfigError naming --outputs for an output the
/// model does not return; any rank's failure is every rank's ("prediction stopped: rank R: ...").
PredictSummary predict(ModelProxy& model, std::shared_ptr<SampleSource> split, LoaderOptions loader_options,
                       const BatchPlacement& placement, const PredictOptions& options, PredictionWriter* writer,
                       Progress& progress, Collectives& collectives);

}  // namespace tp
