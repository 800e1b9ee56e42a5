// TensorBoard's Event messages, built and inspected without exposing protobuf: each builder returns
// one serialised `Event` (tensorflow/core/util/event.proto), ready to frame with tfrecord_frame().
// What each summary looks like follows the writers TensorBoard itself ships, so every reader
// (TensorBoard's Python EventAccumulator, its Rust data server, tbparse) sees the usual plugins:
//   scalars  Summary.Value.simple_value (float32)
//   text     a DT_STRING scalar tensor with plugin "text" (markdown)
//   images   Summary.Value.image, the PNG bytes as they are on disk
//   hparams  plugin "hparams" metadata whose content is an HParamsPluginData (experiment, session
//            start with the hyperparameters, session end), on a zero-length float tensor
// The protobuf code (generated at build time from monitor/proto/tensorboard_event.proto) stays in
// tensorboard_events.cpp, the only file that includes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tp {

/// One hyperparameter of the hparams plugin: a number, a bool or a string.
struct HParam {
  std::string name;                             ///< e.g. "optim.lr"
  std::variant<double, bool, std::string> value;
};

/// Tags the hparams plugin looks for (tensorboard/plugins/hparams/metadata.py).
inline constexpr std::string_view kHParamsExperimentTag = "_hparams_/experiment";
inline constexpr std::string_view kHParamsSessionStartTag = "_hparams_/session_start_info";
inline constexpr std::string_view kHParamsSessionEndTag = "_hparams_/session_end_info";

/// The first event of every file: file_version "brain.Event:2" (readers then take restarts from
/// SessionLog events, which torchhost never writes, instead of purging on out-of-order steps).
std::string event_file_version(double wall_time);

/// One event at `step` holding every (tag, value) as a scalar summary (float32; NaN and Inf are
/// written as they are).
std::string event_scalars(double wall_time, int64_t step, const std::vector<std::pair<std::string, double>>& values);

/// A text-plugin summary: `markdown` under `tag`.
std::string event_text(double wall_time, int64_t step, std::string_view tag, std::string_view markdown);

/// One image summary per (tag, PNG file bytes); width, height and colour space are read from each
/// PNG's header. Throws tp::Error naming the tag when a file is not a PNG.
std::string event_images(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, std::string>>& tagged_pngs);

/// The hparams plugin's session start: the hyperparameters of this run.
std::string event_hparams_start(double wall_time, const std::vector<HParam>& hparams);

/// The hparams plugin's experiment: which hyperparameters exist (and their type) and which scalar
/// tags are the metrics its table shows (the last value of each).
std::string event_hparams_experiment(double wall_time, const std::vector<HParam>& hparams,
                                     const std::vector<std::string>& metric_tags);

/// The hparams plugin's session end: status success (the run finished) at `step`.
std::string event_hparams_end(double wall_time, int64_t step);

/// What an event on disk is, as far as rewriting a file on resume needs to know.
struct EventInfo {
  bool parsed = false;       ///< false: not an Event we can read (kept as it is)
  int64_t step = 0;
  bool file_version = false; ///< the file's first event
  std::vector<std::string> tags; ///< the summary values' tags, in order
};

/// Reads the step, kind and tags of one serialised event.
EventInfo inspect_event(std::string_view event);

}  // namespace tp
