#include "tp/framework/engine/predictor.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <utility>

#include "tp/framework/data/collate.h"
#include "class_columns.h"
#include "class_maps.h"
#include "ragged_rows.h"
#include "tp/framework/dist/collectives.h"
#include "engine/training/batch_error.h"
#include "engine/prediction/hflip_tta.h"
#include "tp/framework/engine/pixel_maps.h"
#include "tp/framework/engine/stop_signal.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

constexpr const char* kIndexField = "__tp_index"; // added by IndexedSource, never seen by the model

// The split with each sample's dataset index as one more field, so the records of a batch know
// their rows even when data.on_bad_sample = "skip" left samples out.
class IndexedSource final : public SampleSource {
 public:
  explicit IndexedSource(std::shared_ptr<SampleSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  NamedTensors get(uint64_t index, const tp_worker_ctx_t& ctx) const override {
    NamedTensors sample = inner_->get(index, ctx);
    sample.emplace_back(kIndexField, at::scalar_tensor(static_cast<int64_t>(index), at::kLong));
    return sample;
  }
  bool serial() const override { return inner_->serial(); }
  void set_epoch(uint64_t epoch) override { inner_->set_epoch(epoch); }
  std::string name() const override { return inner_->name(); }
  const BatchLayout& batch_layout() const override { return inner_->batch_layout(); }
  const std::vector<uint64_t>& sample_groups() const override { return inner_->sample_groups(); }
  const std::vector<EncodedImageSpec>& encoded_images() const override { return inner_->encoded_images(); }

 private:
  std::shared_ptr<SampleSource> inner_;
};

// `batch` with its last sample repeated up to `size` rows (a view of it when it is already that
// long): the model then always runs at one batch size.
NamedTensors padded(const NamedTensors& batch, int64_t size) {
  NamedTensors out;
  for (const auto& [name, tensor] : batch) {
    const int64_t missing = size - tensor.size(0);
    if (missing <= 0) {
      out.emplace_back(name, tensor);
      continue;
    }
    std::vector<int64_t> repeat(static_cast<std::size_t>(tensor.dim()), 1);
    repeat[0] = missing;
    out.emplace_back(name, at::cat({tensor, tensor.narrow(0, tensor.size(0) - 1, 1).repeat(repeat)}));
  }
  return out;
}

// The first `rows` rows of every output (the real samples of a padded batch).
NamedTensors first_rows(NamedTensors outputs, int64_t rows) {
  for (auto& [name, tensor] : outputs)
    if (tensor.dim() > 0 && tensor.size(0) > rows) tensor = tensor.narrow(0, 0, rows);
  return outputs;
}

class RowMaker {
 public:
  RowMaker(ModelProxy& model, const BatchPlacement& placement, const PredictOptions& options, int64_t batch_size,
           const BatchLayout& layout)
      : model_(model), placement_(placement), options_(options), batch_size_(batch_size), layout_(layout) {
    bool ragged = false;
    for (const FieldBatching& f : layout_.fields()) ragged = ragged || f.batching == Batching::kRagged;
    if (options_.tta_hflip && ragged)
      throw ConfigError("--tta", "host predict --tta hflip mirrors the images, but the split declares ragged "
                                 "fields (" + layout_.describe() + "), whose coordinates (boxes, points) it cannot "
                                 "mirror. Predict without --tta.");
  }

  /// The ragged outputs written into each jsonl line as arrays (empty for a model without any).
  const std::vector<std::string>& arrays() const { return arrays_; }

  RecordBlock records(NamedTensors batch) {
    at::Tensor index;
    NamedTensors inputs, per_sample;
    for (auto& [name, tensor] : batch) {
      if (name == kIndexField) {
        index = tensor;
        continue;
      }
      // One value per sample (a label, an id, a regression target of shape [1]); a ragged field
      // and its offsets are not per sample.
      const bool one_value = tensor.dim() == 1 || (tensor.dim() == 2 && tensor.size(1) == 1);
      if (one_value && !layout_.ragged(name) && !added_by_collate(name)) per_sample.emplace_back(name, tensor.reshape({-1}));
      inputs.emplace_back(name, std::move(tensor));
    }
    const int64_t rows = index.size(0);
    // A short last batch runs at the full batch size, unless rows cannot be repeated: a padded
    // batch's size is its longest sample's anyway, and a ragged field would need new offsets.
    const NamedTensors device_inputs = placement_.to_device(layout_.empty() ? padded(inputs, batch_size_) : inputs);
    ++batches_;
    NamedTensors raw = forward(device_inputs);
    // Ragged outputs (a detector's boxes: a different number per sample) are cut by their offsets.
    const BatchLayout output_rows = output_layout(raw);
    check_rows(raw, output_rows, batch_size(device_inputs, layout_));
    // --outputs naming dense outputs alone of a model that also returns ragged ones (a detector
    // with a semantic head): those go the dense way, per-pixel maps included (dense trial F15).
    if (!output_rows.empty() && !options_.outputs.empty() &&
        std::none_of(options_.outputs.begin(), options_.outputs.end(), [&](const std::string& name) {
          return output_rows.ragged(name);
        }))
      raw = only(raw, chosen(raw));
    else if (!output_rows.empty())
      return ragged_records(batch_rows(raw, 0, rows, output_rows), output_rows, index, per_sample);
    NamedTensors outputs = first_rows(std::move(raw), rows);
    if (options_.tta_hflip) {
      // A padded image is mirrored within its own width (hflip_tta.h), and its map flipped back so.
      const NamedTensors flipped = first_rows(forward(mirrored_batch(device_inputs, layout_)), rows);
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        const at::Tensor& output = outputs[i].second;
        const at::Tensor sizes = pixel_map_sizes(output, inputs, layout_);
        outputs[i].second = hflip_tta_mean(output, flipped[i].second,
                                           sizes.defined() ? sizes.select(1, 1).narrow(0, 0, rows) : sizes);
      }
    }
    std::vector<std::pair<std::string, at::Tensor>> columns{{"index", index}};
    if (options_.class_maps) {
      // --format png: the class map of one dense output as each row's attachment; the table
      // keeps the index and the per-sample fields.
      const std::string name = class_map_output(outputs);
      for (auto& [field, tensor] : per_sample) columns.emplace_back(field, tensor);
      RecordBlock block = pack_records(columns);
      block.attachments = detail::encode_class_maps(name, find(outputs, name), inputs, layout_, rows);
      return block;
    }
    std::vector<std::string> map_members(static_cast<std::size_t>(options_.json_rows ? rows : 0));
    std::vector<std::string> map_names;
    for (const std::string& name : chosen(outputs)) {
      const at::Tensor& output = find(outputs, name);
      // A segmenter's per-pixel output: each sample's map at its own image's size (pixel_maps.h),
      // an array in its jsonl line, or a column where every map has one size.
      std::vector<at::Tensor> maps = pixel_maps(output, inputs, layout_, rows);
      if (!maps.empty()) {
        if (options_.json_rows) detail::append_map_members(map_members, name, maps);
        else columns.emplace_back(name, same_size_maps(name, maps));
        map_names.push_back(name);
        continue;
      }
      columns.emplace_back(name, output);
      if (detail::is_classification(name, output))
        detail::append_class_columns(columns, name, output, options_.sigmoid_scores);
    }
    for (auto& [name, tensor] : per_sample) {
      const bool taken = std::any_of(columns.begin(), columns.end(), [&](const auto& c) { return c.first == name; });
      columns.emplace_back(taken ? "sample." + name : name, tensor);
    }
    RecordBlock block = pack_records(columns);
    if (options_.json_rows && !map_names.empty()) {
      block.attachments = std::move(map_members);
      arrays_ = map_names;
    }
    return block;
  }

 private:
  /// The output --format png draws: the one --outputs names, else "out" (torchvision's
  /// segmentation models), else the first dense one.
  std::string class_map_output(const NamedTensors& outputs) const {
    if (options_.outputs.size() > 1)
      throw ConfigError("--outputs", "host predict --format png writes the class map of one output; --outputs names " +
                                         std::to_string(options_.outputs.size()) + ".");
    if (options_.outputs.size() == 1) return chosen(outputs).front();
    for (const auto& [name, tensor] : outputs)
      if (name == "out" && detail::is_dense_output(tensor)) return name;
    for (const auto& [name, tensor] : outputs)
      if (detail::is_dense_output(tensor)) return name;
    std::string available;
    for (const auto& [name, tensor] : outputs)
      available += (available.empty() ? "" : ", ") + name + " " + c10::str(tensor.scalar_type(), tensor.sizes());
    throw ConfigError("--format", "host predict --format png writes class maps, but model " + model_.id() +
                                      " returns no dense output (floating [B, C, H, W] or integer [B, H, W]); its "
                                      "outputs: " + available + ". Use csv, jsonl or npy.");
  }

  /// The maps of per-pixel output `name` stacked into one column: csv and npy give every row the
  /// same columns. Throws ConfigError naming the sizes when a map's differs from the first this
  /// rank wrote (images of different sizes, or resized back to files of different sizes).
  at::Tensor same_size_maps(const std::string& name, const std::vector<at::Tensor>& maps) {
    auto [first, inserted] = map_shapes_.try_emplace(name, maps.front().sizes().vec());
    for (const at::Tensor& map : maps)
      if (map.sizes() != c10::IntArrayRef(first->second))
        throw ConfigError("--format", "output '" + name + "' of model " + model_.id() + " is a per-pixel map, written "
                          "at each image's own size (the file's where the dataset gives it), and the images differ: " +
                          c10::str(c10::IntArrayRef(first->second)) + " and " + c10::str(map.sizes()) +
                          ". A csv or npy column has one shape for every row: use --format png (a class map per "
                          "image) or --format jsonl (each map as arrays in its own line).");
    return at::stack(maps);
  }

  std::vector<std::string> chosen(const NamedTensors& outputs) const { return chosen(outputs, options_.outputs); }
  std::vector<std::string> chosen(const NamedTensors& outputs, std::vector<std::string> names) const {
    if (names.empty())
      for (const auto& [name, tensor] : outputs) names.push_back(name);
    for (const std::string& name : names)
      if (std::none_of(outputs.begin(), outputs.end(), [&](const auto& o) { return o.first == name; })) {
        std::string available;
        for (const auto& [output, tensor] : outputs) available += (available.empty() ? "" : ", ") + output;
        throw ConfigError("--outputs", "host predict --outputs names '" + name + "', which model " + model_.id() +
                                           " does not return (its outputs: " + available + ").");
      }
    return names;
  }
  /// The outputs named in `names`, in their order.
  static NamedTensors only(const NamedTensors& outputs, const std::vector<std::string>& names) {
    NamedTensors kept;
    for (const std::string& name : names) kept.emplace_back(name, find(outputs, name));
    return kept;
  }
  static const at::Tensor& find(const NamedTensors& outputs, const std::string& name) {
    return std::find_if(outputs.begin(), outputs.end(), [&](const auto& o) { return o.first == name; })->second;
  }

  /// The records of a batch whose model returns ragged outputs (detections): the index, the
  /// chosen stacked outputs and the per-sample fields as columns, and each sample's ragged
  /// outputs (by default all of them, and only them) as JSON members of its jsonl line.
  RecordBlock ragged_records(const NamedTensors& outputs, const BatchLayout& output_rows, const at::Tensor& index,
                             const NamedTensors& per_sample) {
    std::string ragged_names;
    for (const FieldBatching& f : output_rows.fields()) ragged_names += (ragged_names.empty() ? "" : ", ") + f.name;
    if (options_.tta_hflip)
      throw ConfigError("--tta", "host predict --tta hflip averages an output with that of the mirrored image, but model " +
                                     model_.id() + " returns ragged outputs (" + ragged_names +
                                     "): detections of a mirrored image cannot be averaged with the image's. Predict "
                                     "without --tta.");
    if (!options_.json_rows)
      throw ConfigError("--format", "model " + model_.id() + " returns ragged outputs (" + ragged_names +
                                        ": a different number of rows per sample), which fit no csv or npy column. "
                                        "Use --format jsonl: one line per sample with them as arrays.");
    std::vector<std::string> names = options_.outputs;
    if (names.empty())
      for (const FieldBatching& f : output_rows.fields()) names.push_back(f.name);
    std::vector<std::string> ragged;
    std::vector<std::pair<std::string, at::Tensor>> columns{{"index", index}};
    for (const std::string& name : chosen(outputs, names)) {
      if (output_rows.ragged(name)) ragged.push_back(name);
      else columns.emplace_back(name, find(outputs, name));
    }
    for (const auto& [name, tensor] : per_sample) columns.emplace_back(name, tensor);
    RecordBlock block = pack_records(columns);
    block.attachments = detail::ragged_json_members(outputs, ragged, output_rows, block.rows);
    arrays_ = ragged;
    return block;
  }

  ModelProxy& model_;
  const BatchPlacement& placement_;
  const PredictOptions& options_;
  /// The model's forward; a failure names the model, the batch and its fields (batch_error.h).
  NamedTensors forward(const NamedTensors& inputs) {
    return with_batch_context([&] { return model_.forward(inputs); }, [&] {
      return BatchFailure{"model", model_.id(), "forward", "the prediction (this rank's batch " + std::to_string(batches_) + ")",
                          "[model]", {{"inputs", &inputs}}};
    });
  }

  /// Refuses an output that is neither cut by offsets nor one row per sample of the `forwarded`
  /// batch: first_rows keeps the first rows of each, so a flattened [B * C] output would lend
  /// sample 0's values to rows 0 to C - 1 without a word.
  void check_rows(const NamedTensors& raw, const BatchLayout& output_rows, int64_t forwarded) const {
    for (const auto& [name, tensor] : raw) {
      const bool offsets = name.ends_with("_offsets") && output_rows.ragged(name.substr(0, name.size() - 8));
      if (output_rows.ragged(name) || offsets || (tensor.dim() > 0 && tensor.size(0) == forwarded)) continue;
      throw PluginError(model_.id(), "forward",
                        "host predict: output '" + name + "' of model " + model_.id() + " has shape " +
                            c10::str(tensor.sizes()) + " for a batch of " + std::to_string(forwarded) +
                            " samples: prediction writes a row per sample from each output's first dimension, so "
                            "an output needs one row per sample ([N, ...]), or a '" + name +
                            "_offsets' output beside it for a varying number of rows per sample (docs/predict.md, "
                            "\"Detection\"); change the model's forward");
    }
  }

  /// Whether collate added `name` for a variable-size field ("<field>_lengths", "<field>_offsets").
  bool added_by_collate(const std::string& name) const {
    for (const FieldBatching& f : layout_.fields())
      if (name == BatchLayout::lengths_name(f.name) || name == BatchLayout::offsets_name(f.name)) return true;
    return false;
  }

  int64_t batch_size_; ///< every forward runs at this batch size (padded), when layout_ is empty
  const BatchLayout& layout_;
  int64_t batches_ = 0; ///< batches this rank has predicted, for messages
  std::vector<std::string> arrays_; ///< the ragged or per-pixel outputs the last batch wrote as JSON arrays
  std::map<std::string, std::vector<int64_t>> map_shapes_; ///< per-pixel output -> its maps' shape (csv, npy)
};

// Appends `value` as 8 little-endian bytes (the host's order: every rank is this build).
void put_length(std::vector<uint8_t>& out, int64_t value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof value);
}

// `block` as one byte string: schema text, records, then each attachment as length + bytes.
std::vector<uint8_t> serialise(const RecordBlock& block) {
  std::vector<uint8_t> out;
  if (block.rows == 0) return out;
  const std::string schema = schema_text(block.schema);
  put_length(out, static_cast<int64_t>(schema.size()));
  out.insert(out.end(), schema.begin(), schema.end());
  put_length(out, static_cast<int64_t>(block.bytes.size()));
  out.insert(out.end(), block.bytes.begin(), block.bytes.end());
  put_length(out, static_cast<int64_t>(block.attachments.size()));
  for (const std::string& a : block.attachments) {
    put_length(out, static_cast<int64_t>(a.size()));
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

// The inverse of serialise, over `size` bytes at `data`.
RecordBlock deserialise(const uint8_t* data, int64_t size) {
  RecordBlock block;
  int64_t at = 0;
  const auto take = [&](int64_t count) {
    TP_CHECK(count >= 0 && at + count <= size, "predictions: a rank's block is truncated");
    const uint8_t* start = data + at;
    at += count;
    return start;
  };
  const auto length = [&] {
    int64_t value = 0;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  };
  const int64_t schema_length = length();
  block.schema = parse_schema(std::string(reinterpret_cast<const char*>(take(schema_length)),
                                          static_cast<std::size_t>(schema_length)));
  const int64_t byte_length = length();
  const uint8_t* records = take(byte_length);
  block.bytes.assign(records, records + byte_length);
  block.rows = byte_length / record_bytes(block.schema);
  const int64_t attachments = length();
  for (int64_t i = 0; i < attachments; ++i) {
    const int64_t n = length();
    block.attachments.emplace_back(reinterpret_cast<const char*>(take(n)), static_cast<std::size_t>(n));
  }
  return block;
}

// Every rank's block of this round, in rank order, on rank 0 (other ranks get none): two
// all_gathers, the sizes and then the serialised blocks padded to the longest. Merged later, by
// merge_blocks, inside the round the ranks agree on.
std::vector<RecordBlock> gather_blocks(RecordBlock mine, Collectives& collectives) {
  // A single process holds its only block already: no bytes to move (dense outputs such as a
  // segmentation model's logits are megabytes per sample).
  if (collectives.world_size() == 1) {
    std::vector<RecordBlock> own;
    own.push_back(std::move(mine));
    return own;
  }
  const std::vector<uint8_t> payload_bytes = serialise(mine);
  const c10::Device device = collectives.device();
  const at::Tensor size = at::tensor(std::vector<int64_t>{static_cast<int64_t>(payload_bytes.size())}, at::kLong).to(device);
  const std::vector<at::Tensor> all_sizes = collectives.all_gather(size, "gather the prediction block sizes");
  int64_t longest = 1;
  std::vector<int64_t> lengths;
  for (const at::Tensor& s : all_sizes) {
    lengths.push_back(s.cpu().item<int64_t>());
    longest = std::max(longest, lengths.back());
  }
  at::Tensor payload = at::zeros({longest}, at::kByte);
  if (!payload_bytes.empty()) std::memcpy(payload.data_ptr(), payload_bytes.data(), payload_bytes.size());
  const std::vector<at::Tensor> all = collectives.all_gather(payload.to(device), "gather the prediction rows on rank 0");
  std::vector<RecordBlock> blocks;
  if (collectives.rank() != 0) return blocks;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const at::Tensor bytes = all[r].cpu();
    blocks.push_back(lengths[r] == 0 ? RecordBlock{}
                                     : deserialise(static_cast<const uint8_t*>(bytes.data_ptr()), lengths[r]));
  }
  return blocks;
}

// The ranks' blocks of one round (gather_blocks: index r is rank r's) as one block; throws
// tp::Error naming both column lists when a rank's columns differ from the first rank's.
RecordBlock merge_blocks(std::vector<RecordBlock> blocks) {
  RecordBlock merged;
  int schema_rank = 0;
  for (std::size_t r = 0; r < blocks.size(); ++r) {
    RecordBlock& block = blocks[r];
    if (block.rows == 0) continue;
    if (merged.schema.empty()) {
      merged.schema = block.schema;
      schema_rank = static_cast<int>(r);
    }
    if (block.schema != merged.schema)
      throw Error("predictions: rank " + std::to_string(r) + " produced the columns " + columns_text(block.schema) +
                  " where rank " + std::to_string(schema_rank) + " produced " + columns_text(merged.schema) +
                  "; every sample needs the same fields and output shapes and dtypes on every rank.");
    merged.bytes.insert(merged.bytes.end(), block.bytes.begin(), block.bytes.end());
    merged.rows += block.rows;
    for (std::string& a : block.attachments) merged.attachments.push_back(std::move(a));
  }
  return merged;
}

}  // namespace

PredictSummary predict(ModelProxy& model, std::shared_ptr<SampleSource> split, LoaderOptions loader_options,
                       const BatchPlacement& placement, const PredictOptions& options, PredictionWriter* writer,
                       Progress& progress, Collectives& collectives) {
  if (loader_options.mode() != LoaderMode::kEvalExact || loader_options.shuffle())
    throw Error("predict: the loader must read the split exactly once, unshuffled (LoaderMode::kEvalExact)");
  // A short batch is padded to the batch size (padded(): every forward at one size), but never
  // past the split's own size: one image with eval.batch_size = 4096 ran 4096 images' network
  // (security trial F11: 18 GB and 99 s for 8 images at 50,000). A split smaller than the batch
  // is one batch on every rank count, so its samples still meet one size.
  const int64_t padded_size =
      std::min<int64_t>(loader_options.batch_size(), static_cast<int64_t>(std::max<uint64_t>(split->size(), 1)));
  DataLoader loader(std::make_shared<IndexedSource>(std::move(split)), loader_options);
  // Rank 0 holds the most batches (kEvalExact deals them from rank 0 on), so its count is the rounds' number.
  const int64_t mine = loader.batches_per_epoch();
  const std::vector<at::Tensor> counts{at::tensor(std::vector<int64_t>{mine}, at::kLong).to(collectives.device())};
  collectives.broadcast(counts, "agree on the prediction rounds");
  const int64_t rounds = counts[0].cpu().item<int64_t>();
  PredictSummary summary;
  RowMaker rows(model, placement, options, padded_size, loader.batch_layout());
  model.set_training(false);
  c10::InferenceMode inference;
  // Ranks run their own numbers of batches: a model's tp.dist/2 calls stay local (collectives.h).
  const LocalPluginCalls local_plugin_calls(collectives);
  progress.start_task("predict", rounds);
  loader.start_epoch(0);
  // Rank 0 merges and writes each gathered round at the start of the next one (and the last after
  // the loop), inside the part every rank agrees on: ranks whose columns differ, or a failed write
  // (a full disk), end every rank in the same round with rank 0's message instead of leaving the
  // others waiting in the next gather.
  std::vector<RecordBlock> gathered;
  auto write_gathered = [&] {
    RecordBlock merged = merge_blocks(std::exchange(gathered, {}));
    if (writer == nullptr || merged.rows == 0) return;
    sort_by_index(merged);
    if (summary.schema.empty()) summary.schema = merged.schema;
    writer->write(merged);
  };
  for (int64_t round = 0; round <= rounds; ++round) {
    // 1. Rank 0 appends the previous round in dataset order; this rank's batch of the round
    //    (none past its stride's end, or all samples skipped). Round `rounds` only writes.
    RecordBlock block;
    std::string failure;
    std::exception_ptr error;
    try {
      // SIGINT/SIGTERM (handlers installed by `host predict`): stop between rounds; the writer's
      // destructor removes the partial file on the way out.
      if (const int signal_number = pending_stop_signal())
        throw Interrupted(signal_number, "host predict stopped by signal " + std::to_string(signal_number) +
                                             " after " + std::to_string(round) + " of " + std::to_string(rounds) +
                                             " rounds; nothing was written under the final name (the partial "
                                             "file is removed). Run the same command again.");
      write_gathered();
      if (round < mine) {
        std::optional<NamedTensors> batch = loader.next();
        if (batch && !batch->empty()) block = rows.records(std::move(*batch));
      }
    } catch (const std::exception& e) {
      failure = e.what();
      error = std::current_exception();
    }
    // 2. Every rank learns of a failure on any rank, instead of waiting in the gather.
    const std::string first = collectives.first_failure(failure, "agree that the prediction round succeeded");
    if (error) std::rethrow_exception(error);
    if (!first.empty()) throw Error("prediction stopped: " + first);
    if (round == rounds) break;
    // 3. Rank 0 holds every rank's rows of the round.
    gathered = gather_blocks(std::move(block), collectives);
    progress.update(round + 1, std::numeric_limits<double>::quiet_NaN(), 0.0);
  }
  std::vector<at::Tensor> skipped{
      at::tensor(std::vector<int64_t>{loader.skipped_count()}, at::kLong).to(collectives.device())};
  collectives.all_reduce_sum(skipped, "count the samples skipped while predicting");
  summary.skipped = skipped[0].cpu().item<int64_t>();
  summary.skipped_here = loader.first_skipped();
  summary.rows = writer != nullptr ? writer->rows() : 0;
  summary.arrays = rows.arrays();
  progress.end_epoch({});
  return summary;
}

}  // namespace tp
