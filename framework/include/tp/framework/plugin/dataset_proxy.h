// Host-side handle of a dataset component ("tp.dataset/1"), as a SampleSource for the loader.
// Fields arrive as DLPack tensors and become at::Tensor without a copy; each tensor's deleter
// (plugin code) keeps the plugin library loaded until it has run.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/class_names.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "tp/iface/dataset.h"

namespace tp {

class DatasetProxy : public PluginInstance, public SampleSource {
 public:
  /// Creates the dataset for `split` ("train", "val" or "test"). Throws PluginError for "test"
  /// from a plugin built for ABI < 1.5, which knows only train and val.
  DatasetProxy(ComponentEntry entry, const ComponentConfig& config, std::string split);
  /// Calls the component's prepare entry (ABI 1.5, PLG-17) for `split` with `config`; returns
  /// false without calling anything when it has none (NULL, or a plugin built for ABI < 1.5).
  /// Throws PluginError with the plugin's message when it fails.
  static bool prepare(const ComponentEntry& entry, const ComponentConfig& config, const std::string& split);
  ~DatasetProxy() override;

  uint64_t size() const override { return size_; }
  NamedTensors get(uint64_t index, const tp_worker_ctx_t& ctx) const override;
  bool serial() const override { return (info_->flags & TP_DESCRIPTOR_SERIAL) != 0; }
  void set_epoch(uint64_t epoch) override;
  std::string name() const override { return id() + " (" + split_ + ")"; }
  /// The fields the plugin declared pad or ragged (ABI 1.6), read once after create.
  const BatchLayout& batch_layout() const override { return layout_; }
  /// The layout `count` entries of a field_batching answer describe (their stride is the first
  /// entry's struct_size, PLG-2). Throws tp::Error saying what is malformed: a NULL array, a
  /// struct_size below ABI 1.6's, a missing name, an unknown batching, a repeated name.
  static BatchLayout parse_field_batching(const tp_field_batching_t* entries, uint32_t count);
  /// The groups the plugin declared (ABI 1.10), read once after create; empty without.
  const std::vector<uint64_t>& sample_groups() const override { return group_ends_; }
  /// The group ends `count` entries of a sample_groups answer hold, checked against the dataset's
  /// `size`. Throws tp::Error saying what is malformed: a NULL array, no group for a non-empty
  /// dataset, ends that do not increase, a last end other than `size`.
  static std::vector<uint64_t> parse_sample_groups(const uint64_t* ends, uint64_t count, uint64_t size);
  /// The image fields the plugin can hand over encoded (ABI 1.11), read once after create.
  const std::vector<EncodedImageSpec>& encoded_images() const override { return encoded_; }
  /// The specs `count` entries of an encoded_images answer describe (their stride is the first
  /// entry's struct_size, PLG-2). Throws tp::Error saying what is malformed: a NULL array, a
  /// struct_size below ABI 1.11's, a missing or repeated name, an available entry without an output
  /// size, an unavailable one without a reason.
  static std::vector<EncodedImageSpec> parse_encoded_images(const tp_encoded_image_t* entries, uint32_t count);
  /// The names of its label field's classes the plugin lent (ABI 1.12), read once after create;
  /// empty without (NULL member, a plugin built for ABI < 1.12, or NULL lent).
  const ClassNames& class_names() const { return classes_; }
  /// The names a class_names answer lends (NULL: none). Throws tp::Error saying what is malformed:
  /// a struct_size below ABI 1.12's, no field, names at a NULL pointer, a NULL name, or a name
  /// check_class_names refuses (empty, too long, not UTF-8, a control character).
  static ClassNames parse_class_names(const tp_class_names_t* lent);
  /// The longest sample name the host takes, in bytes: Linux's PATH_MAX.
  static constexpr std::size_t kMaxSampleKeyBytes = 4096;
  /// The name of each sample (ABI 1.13), in index order, asked of the plugin on each call (host
  /// predict asks once); empty when it names none (NULL member, a plugin built for ABI < 1.13).
  /// A NULL entry reads as "". Throws PluginError naming the component for a malformed answer.
  std::vector<std::string> sample_keys() const;
  /// The names a sample_keys answer lends. Throws tp::Error saying what is malformed: a count
  /// other than `size`, `count` names at a NULL pointer, a name longer than kMaxSampleKeyBytes.
  static std::vector<std::string> parse_sample_keys(const char* const* keys, uint64_t count, uint64_t size);

 private:
  /// Reads and validates field_batching; throws PluginError naming the component for a malformed
  /// declaration.
  BatchLayout read_field_batching() const;
  /// Reads and validates sample_groups; throws PluginError naming the component for a malformed
  /// declaration.
  std::vector<uint64_t> read_sample_groups() const;
  /// Reads and validates encoded_images; throws PluginError naming the component for a malformed
  /// declaration.
  std::vector<EncodedImageSpec> read_encoded_images() const;
  /// Reads and validates class_names; throws PluginError naming the component for a malformed
  /// declaration.
  ClassNames read_class_names() const;

  tp_dataset_v1_t table_{};
  void* self_ = nullptr;
  std::string split_;
  uint64_t size_ = 0;
  BatchLayout layout_;
  std::vector<uint64_t> group_ends_;
  std::vector<EncodedImageSpec> encoded_;
  ClassNames classes_;
};

}  // namespace tp
