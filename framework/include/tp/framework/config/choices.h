// Enumerated choices: host keys whose value is one word of a fixed list (train.nan_policy =
// "stop" | "skip"), parsed into an enum when the config is loaded, a value kind beside duration
// and precision (value_kinds.h). The words are declared once, here, beside the enum: the key
// table takes its list of allowed values from them (key_binding.h), validate_host_table() refuses
// any other word naming the key and the list, and the engine compares enums, so a misspelt choice
// does not compile (docs/config_keys.md, "Value kinds").
//
// No LibTorch here (ARCH-1).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp {

/// The config words of the enum E, in the order messages list them; specialised for each choice
/// below as `static constexpr std::array<std::pair<E, std::string_view>, N> kWords`.
template <typename E>
struct ChoiceWords;

/// An enum with config words.
template <typename E>
concept Choice = requires { ChoiceWords<E>::kWords; };

/// The value whose config word is `word` (exact, case matters); nullopt for any other word.
template <Choice E>
std::optional<E> try_parse_choice(std::string_view word) {
  for (const auto& [value, spelling] : ChoiceWords<E>::kWords)
    if (spelling == word) return value;
  return std::nullopt;
}

/// The config word of `value` ("skip" for NanPolicy::kSkip).
template <Choice E>
std::string_view to_string(E value) noexcept {
  for (const auto& [candidate, spelling] : ChoiceWords<E>::kWords)
    if (candidate == value) return spelling;
  return {};
}

/// Every config word of E, in declaration order: the key's allowed values.
template <Choice E>
std::vector<std::string> choice_words() {
  std::vector<std::string> out;
  out.reserve(ChoiceWords<E>::kWords.size());
  for (const auto& entry : ChoiceWords<E>::kWords) out.emplace_back(entry.second);
  return out;
}

/// data.decode: where image files are decoded (docs/datasets.md, "Decoding on the GPU").
enum class DecodeMode {
  kCpu,  ///< the dataset's loader threads decode and transform (the plugin's own path)
  kGpu,  ///< the device decodes (nvJPEG) and transforms, or the run is refused naming why it cannot
  kAuto, ///< the device where it can, the CPU otherwise (runtime.toml says which and why)
};
template <>
struct ChoiceWords<DecodeMode> {
  static constexpr std::array<std::pair<DecodeMode, std::string_view>, 3> kWords{
      {{DecodeMode::kCpu, "cpu"}, {DecodeMode::kGpu, "gpu"}, {DecodeMode::kAuto, "auto"}}};
};

/// run.cuda_graphs: capture the training step in a CUDA graph (docs/cuda_graphs.md).
enum class CudaGraphMode {
  kOff,  ///< every step eager
  kOn,   ///< captured, or the run is refused naming why it cannot be
  kAuto, ///< captured where it applies and timing shows it faster; eager otherwise
};
template <>
struct ChoiceWords<CudaGraphMode> {
  static constexpr std::array<std::pair<CudaGraphMode, std::string_view>, 3> kWords{
      {{CudaGraphMode::kOff, "off"}, {CudaGraphMode::kOn, "on"}, {CudaGraphMode::kAuto, "auto"}}};
};

/// run.sync_debug: what a CUDA call that makes the host wait for the device does inside a step.
enum class SyncDebugMode {
  kOff,   ///< nothing
  kWarn,  ///< a warning naming the call
  kError, ///< an error naming the call
};
template <>
struct ChoiceWords<SyncDebugMode> {
  static constexpr std::array<std::pair<SyncDebugMode, std::string_view>, 3> kWords{
      {{SyncDebugMode::kOff, "off"}, {SyncDebugMode::kWarn, "warn"}, {SyncDebugMode::kError, "error"}}};
};

/// train.nan_policy: what a non-finite training loss does.
enum class NanPolicy {
  kStop, ///< the run stops, naming the step, the batch and the lr
  kSkip, ///< that optimizer step is skipped, with a warning and a count at the end
};
template <>
struct ChoiceWords<NanPolicy> {
  static constexpr std::array<std::pair<NanPolicy, std::string_view>, 2> kWords{
      {{NanPolicy::kStop, "stop"}, {NanPolicy::kSkip, "skip"}}};
};

/// train.on_oom: what running out of device memory inside a step does.
enum class OomPolicy {
  kFail,  ///< the run stops with the out-of-memory report
  kSplit, ///< micro-batches are cut in halves until they fit, with exactly the same update
};
template <>
struct ChoiceWords<OomPolicy> {
  static constexpr std::array<std::pair<OomPolicy, std::string_view>, 2> kWords{
      {{OomPolicy::kFail, "fail"}, {OomPolicy::kSplit, "split"}}};
};

/// eval.strategy, checkpoint.strategy: when evaluations or periodic saves happen.
enum class IntervalStrategy {
  kEpoch, ///< every `every` epochs
  kSteps, ///< every `every` optimizer steps
  kNo,    ///< never (a checkpoint still records a stop's position)
};
template <>
struct ChoiceWords<IntervalStrategy> {
  static constexpr std::array<std::pair<IntervalStrategy, std::string_view>, 3> kWords{
      {{IntervalStrategy::kEpoch, "epoch"}, {IntervalStrategy::kSteps, "steps"}, {IntervalStrategy::kNo, "no"}}};
};

/// data.on_bad_sample: what the loader does when SampleSource::get throws for one sample.
enum class BadSamplePolicy {
  /// Stop: next() throws SampleError naming the source, the index and the sample's message
  /// (which names the file, for file-backed datasets).
  kFail,
  /// Drop the sample from its batch (the batch is smaller; a batch left with no sample is
  /// returned as an empty NamedTensors, so an epoch always has batches_per_epoch() batches),
  /// count it, and go on. Which samples are dropped depends only on the dataset, never on the
  /// workers, so skips are the same, in the same order, for any num_workers. Collation errors
  /// (samples of different shapes) still fail: they are a dataset bug, not a bad file.
  kSkip,
};
template <>
struct ChoiceWords<BadSamplePolicy> {
  static constexpr std::array<std::pair<BadSamplePolicy, std::string_view>, 2> kWords{
      {{BadSamplePolicy::kFail, "fail"}, {BadSamplePolicy::kSkip, "skip"}}};
};

/// dist.bn_stats: how the ranks' BatchNorm statistics agree before each evaluation and save.
enum class BatchNormSync {
  kBroadcast, ///< rank 0's statistics (what dist.broadcast_buffers does before each step)
  kReduce,    ///< the mean over ranks: all-reduce SUM, then divide by the world size
};
template <>
struct ChoiceWords<BatchNormSync> {
  static constexpr std::array<std::pair<BatchNormSync, std::string_view>, 2> kWords{
      {{BatchNormSync::kBroadcast, "broadcast"}, {BatchNormSync::kReduce, "reduce"}}};
};

/// ema.buffers: what the EMA does with the model's floating-point buffers (BatchNorm statistics).
enum class AverageBuffers {
  kAverage, ///< averaged like the parameters (AveragedModel's use_buffers=True)
  kCopy,    ///< copied from the model at every update (use_buffers=False)
};
template <>
struct ChoiceWords<AverageBuffers> {
  static constexpr std::array<std::pair<AverageBuffers, std::string_view>, 2> kWords{
      {{AverageBuffers::kAverage, "average"}, {AverageBuffers::kCopy, "copy"}}};
};

/// swa.anneal_strategy: the shape of SWALR's annealing from the schedule's lr to swa.lr.
enum class AnnealShape {
  kCos,    ///< cosine
  kLinear, ///< linear
};
template <>
struct ChoiceWords<AnnealShape> {
  static constexpr std::array<std::pair<AnnealShape, std::string_view>, 2> kWords{
      {{AnnealShape::kCos, "cos"}, {AnnealShape::kLinear, "linear"}}};
};

}  // namespace tp
