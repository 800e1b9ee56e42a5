// torchhost C++ helpers for Tier S plugin authors: a dataset as a C++ class, and the C shell
// ("tp.dataset/1": create/destroy/size/get_sample/set_epoch) generated from it.
//
// A dataset class needs three members; the adapter does the rest: it validates the split and
// every pointer, checks the index, wraps each call in TP_GUARD (PLG-7), hands fields over only
// when get_sample succeeds (PLG-9) and accepts destroy(NULL) (PLG-12). No LibTorch (PLG-14).
//
//   class Squares {
//    public:
//     explicit Squares(const tp::cpp::DatasetArgs& args)          // [main] throw Failure to refuse
//         : count_(args.config.get_int_in("size", 1, 1 << 20)) {}
//     uint64_t size() const { return count_; }                      // [any] constant
//     void get_sample(uint64_t index, const tp::cpp::WorkerContext&, tp::cpp::Sample& out) const {
//       out.add("x", std::vector<float>{float(index)}, {1});       // [worker] concurrent: const
//       out.add("y", std::vector<float>{float(index * index)}, {1});
//     }
//     // optional: void set_epoch(uint64_t epoch);                  // [main] no get_sample running
//     // optional: static constexpr bool kHasTestSplit = true;      // also serve split "test" (ABI 1.5)
//     //   (host eval/predict --split test ask for it; without this line the adapter refuses it)
//     // optional: static void prepare(const tp::cpp::DatasetArgs&); // once per node first (ABI 1.5)
//     // optional: std::vector<tp_field_batching_t> field_batching() const;  // variable-size
//     //   fields (ABI 1.6): {tp::cpp::pad_field("image", 0), tp::cpp::ragged_field("boxes")}
//     // optional: std::vector<uint64_t> sample_groups() const;  // contiguous groups (ABI 1.10):
//     //   each group's end index, strictly increasing, the last = size() (a tar shard per group)
//     // optional: std::vector<tp_encoded_image_t> encoded_images() const;  // images the host
//     //   decodes (ABI 1.11): {tp::cpp::encoded_image("image", 224, 224, mean, std, false)} or
//     //   {tp::cpp::unavailable_encoded_image("image", reason_.c_str())}; get_sample then checks
//     //   WorkerContext::encoded_images() and writes "image" (the file's bytes) + "image_box"
//     // optional: tp::cpp::ClassNames class_names() const;  // the names of the label's classes
//     //   (ABI 1.12), in id order: {"label", {"cat", "dog"}}; empty names = none known
//     // optional: std::vector<std::string> sample_keys() const;  // each sample's name, in index
//     //   order (ABI 1.13): its file or shard:key, for host predict's `path` column; built on demand
//    private:
//     uint64_t count_;
//   };
//   const tp_config_key_t kKeys[] = {{sizeof(tp_config_key_t), "size", TP_CFG_INT, "100", "samples"}};
//   const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor("org.example.squares", "1.0.0", "x -> x^2", kKeys);
//   TP_DEFINE_DATASET_PLUGIN("squares", Squares, kDescriptor)
//
// A class label is a scalar int64 field: out.add("label", std::vector<int64_t>{label}, {}) (shape
// {}, ndim 0), which the loader stacks into an int64 [B] tensor of class indices, what
// cross_entropy and accuracy read; shape {1} would batch as [B, 1]. A complete dataset with every
// part explained: plugins/template/tier_s_cpp_dataset/ (installed: share/torchhost/templates/).
//
// A library with several components lists tp::cpp::dataset_component<Class, kDescriptor>() entries
// in its tp::cpp::Component array and calls TP_DEFINE_PLUGIN itself. Messages the adapter writes
// start with the last segment of the component id ("squares: index 7 is out of range ...").
#ifndef TP_CPP_DATASET_ADAPTER_H
#define TP_CPP_DATASET_ADAPTER_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/dlpack.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/random.h"
#include "tp/iface/dataset.h"

namespace tp::cpp {

/// The split create() builds; the adapter refuses any other name (TP_ERR_INVALID_ARGUMENT), and
/// "test" (TP_ERR_UNSUPPORTED) unless the class declares `static constexpr bool kHasTestSplit =
/// true` (a dataset that treats every split but train as val would otherwise serve its val samples
/// as the test split). Only `host eval --split test` and `host predict --split test` create "test",
/// from [data.test] or, with data.test_from_train, from [data.train]: one size key per split
/// (`size`, `val_size`, `test_size`) lets one table serve all three.
enum class Split { kTrain, kVal, kTest };

/// What a dataset's constructor receives. Everything is borrowed for the constructor only,
/// except `host` (valid until deinit): copy what you need.
struct DatasetArgs {
  const ConfigReader& config;  ///< the validated table; range errors name the component
  Split split;
  const char* split_name;      ///< "train", "val" or "test"
  const tp_host_t* host;       ///< for log(); never NULL when the host calls create
  const char* component;       ///< message prefix: the last segment of the component id

  bool train() const noexcept { return split == Split::kTrain; }
  bool test() const noexcept { return split == Split::kTest; }
  /// Writes `line` to the host log at `level` (TP_LOG_*); does nothing without a host.
  void log(int32_t level, const std::string& line) const {
    if (host != nullptr && host->log != nullptr) host->log(host, level, line.c_str());
  }
};

/// The loader's context of one get_sample call (tp_worker_ctx_t, borrowed for the call).
class WorkerContext {
 public:
  WorkerContext(const tp_worker_ctx_t* ctx, const char* component) noexcept : ctx_(ctx), component_(component) {}
  /// Whether the host passed a context large enough to hold `seed` (PLG-2: read a member only
  /// when the producer's struct_size covers it).
  bool has_seed() const noexcept {
    return ctx_ != nullptr && ctx_->struct_size >= offsetof(tp_worker_ctx_t, seed) + sizeof(uint64_t);
  }
  /// The host's per-sample seed, the only source of a sample's randomness (PLG-8). `purpose` only
  /// names the caller in the error (none in the context): the value is the same whatever the
  /// purpose, seed("view_0") == seed("view_1"); independent streams need stream_seed(name).
  uint64_t seed(const char* purpose) const {
    if (!has_seed())
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    std::string(component_) + ": " + purpose + " needs a tp_worker_ctx_t with a seed");
    return ctx_->seed;
  }
  /// This sample's seed of the stream named `purpose`: tp::cpp::derived_seed(seed, purpose) =
  /// splitmix64(seed ^ fnv1a64(purpose)), fixed on every platform and release (PLG-8); distinct
  /// names give independent streams (two views: stream_seed("view_0"), stream_seed("view_1")).
  uint64_t stream_seed(std::string_view purpose) const { return derived_seed(seed(std::string(purpose).c_str()), purpose); }
  /// Whether the host asks for the encoded form of the image fields this dataset declared
  /// available (tp_worker_ctx_t::encoded_images, ABI 1.11): false when the context is too small
  /// to hold the member (a host before 1.11; PLG-2) or the member is 0. When true, get_sample
  /// writes every field its encoded_images() declares available as the image file's bytes and
  /// `<name>_box` instead of its pixels (PLG-19).
  bool encoded_images() const noexcept {
    return ctx_ != nullptr &&
           ctx_->struct_size >= offsetof(tp_worker_ctx_t, encoded_images) + sizeof(uint32_t) &&
           ctx_->encoded_images != 0;
  }
  /// The raw context (worker, rank, epoch); may be NULL.
  const tp_worker_ctx_t* raw() const noexcept { return ctx_; }

 private:
  const tp_worker_ctx_t* ctx_;
  const char* component_;
};

/// The fields of one sample while get_sample builds it. It owns every field added; the adapter
/// takes them over only when get_sample returns normally, so a throw anywhere releases them
/// (tp_dataset_v1_t: on error no field is handed over). Every sample of a dataset has the same
/// field names, dtypes and shapes, but for the sizes its field_batching() lets vary.
class Sample {
 public:
  Sample() = default;
  Sample(const Sample&) = delete;
  Sample& operator=(const Sample&) = delete;
  ~Sample() { release_fields(fields_.data(), static_cast<uint32_t>(fields_.size())); }

  /// Adds the field `name` (static storage) owning `data` (moved in) with `shape` (make_field).
  /// An empty `shape` makes a scalar (one element, ndim 0): a class label is
  /// `add("label", std::vector<int64_t>{label}, {})`, batched by the loader as int64 [B].
  template <typename T>
  Sample& add(const char* name, std::vector<T> data, std::vector<int64_t> shape) {
    return add(make_field(name, std::move(data), std::move(shape)));
  }
  /// Adds a field made elsewhere (custom strides, a C library's buffer); this sample owns it
  /// from now on, also when adding fails.
  Sample& add(tp_field_t field) {
    try {
      fields_.push_back(field);
    } catch (...) {
      release_fields(&field, 1);
      throw;
    }
    return *this;
  }
  uint32_t count() const noexcept { return static_cast<uint32_t>(fields_.size()); }

  /// [adapter] Moves every field to `out` (room for `capacity`); throws, keeping them, when
  /// they do not fit.
  void hand_over(tp_field_t* out, uint32_t capacity, uint32_t* out_count, const char* component) {
    if (fields_.size() > capacity)
      throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component) + ": capacity " + std::to_string(capacity) +
                                                 " < " + std::to_string(fields_.size()) + " fields");
    if (!fields_.empty()) std::memcpy(out, fields_.data(), fields_.size() * sizeof(tp_field_t));
    *out_count = count();
    fields_.clear();
  }

 private:
  std::vector<tp_field_t> fields_;
};

/// A field padded to the batch's largest size per dim with `pad_value` (TP_BATCH_PAD, ABI 1.6):
/// the loader adds "<name>_lengths", int64 [B, ndim], each sample's own sizes. `name` static.
constexpr tp_field_batching_t pad_field(const char* name, double pad_value) noexcept {
  return {sizeof(tp_field_batching_t), TP_BATCH_PAD, name, pad_value};
}
/// A field whose dim 0 varies per sample (TP_BATCH_RAGGED, ABI 1.6): the loader concatenates the
/// samples along dim 0 and adds "<name>_offsets", int64 [B + 1]. `name` static.
constexpr tp_field_batching_t ragged_field(const char* name) noexcept {
  return {sizeof(tp_field_batching_t), TP_BATCH_RAGGED, name, 0.0};
}

/// An image field `name` (static storage, or the dataset's own member) the host may decode on the
/// device (tp_encoded_image_t, ABI 1.11): the CPU path's pixel field is float32 [3, out_height,
/// out_width] = (rgb / 255 - mean[c]) / stddev[c], HWC memory when `channels_last`. Declaring it
/// promises the encoded form whenever WorkerContext::encoded_images() is true (PLG-19).
constexpr tp_encoded_image_t encoded_image(const char* name, int32_t out_height, int32_t out_width,
                                           const std::array<float, 3>& mean, const std::array<float, 3>& stddev,
                                           bool channels_last) noexcept {
  return {sizeof(tp_encoded_image_t), 1U, name, nullptr, out_height, out_width,
          {mean[0], mean[1], mean[2]}, {stddev[0], stddev[1], stddev[2]}, channels_last ? 1U : 0U};
}
/// An image field `name` this split cannot hand over encoded, and `reason`: one sentence naming
/// the key that prevents it (static storage, or the dataset's own member: borrowed until destroy).
constexpr tp_encoded_image_t unavailable_encoded_image(const char* name, const char* reason) noexcept {
  return {sizeof(tp_encoded_image_t), 0U, name, reason, 0, 0, {0.0F, 0.0F, 0.0F}, {1.0F, 1.0F, 1.0F}, 0U};
}

/// The names a dataset lends for the classes of an integer label field (ABI 1.12,
/// tp_class_names_t): names[i] is what the value i of `field` stands for, in id order. A dataset
/// whose labels have no names (bare integers) returns empty `names`, which lends nothing.
struct ClassNames {
  std::string field = "label";
  std::vector<std::string> names;
};

namespace detail {

template <typename D, typename = void>
struct HasFieldBatching : std::false_type {};
template <typename D>
struct HasFieldBatching<D, std::void_t<decltype(std::vector<tp_field_batching_t>(
                               std::declval<const D&>().field_batching()))>> : std::true_type {};

template <typename D, typename = void>
struct HasSampleGroups : std::false_type {};
template <typename D>
struct HasSampleGroups<D, std::void_t<decltype(std::vector<uint64_t>(std::declval<const D&>().sample_groups()))>>
    : std::true_type {};

template <typename D, typename = void>
struct HasEncodedImages : std::false_type {};
template <typename D>
struct HasEncodedImages<D, std::void_t<decltype(std::vector<tp_encoded_image_t>(
                               std::declval<const D&>().encoded_images()))>> : std::true_type {};

template <typename D, typename = void>
struct HasClassNames : std::false_type {};
template <typename D>
struct HasClassNames<D, std::void_t<decltype(ClassNames(std::declval<const D&>().class_names()))>>
    : std::true_type {};

template <typename D, typename = void>
struct HasSampleKeys : std::false_type {};
template <typename D>
struct HasSampleKeys<D, std::void_t<decltype(std::vector<std::string>(std::declval<const D&>().sample_keys()))>>
    : std::true_type {};

template <typename D, typename = void>
struct HasSetEpoch : std::false_type {};
template <typename D>
struct HasSetEpoch<D, std::void_t<decltype(std::declval<D&>().set_epoch(uint64_t{0}))>> : std::true_type {};

template <typename D, typename = void>
struct HasPrepare : std::false_type {};
template <typename D>
struct HasPrepare<D, std::void_t<decltype(D::prepare(std::declval<const DatasetArgs&>()))>> : std::true_type {};

template <typename D, typename = void>
struct HasTestSplit : std::false_type {};
template <typename D>
struct HasTestSplit<D, std::void_t<decltype(D::kHasTestSplit)>> : std::bool_constant<D::kHasTestSplit> {};

/// One instance: the dataset, the host that created it (for TP_GUARD's messages) and its
/// field_batching(), sample_groups(), encoded_images(), class_names() and (on the first call)
/// sample_keys() lists, kept so the table can lend them until destroy (neither the dataset nor the
/// instance is ever moved, so names and reasons pointing into them stay valid).
template <typename D>
struct DatasetInstance {
  template <typename... Args>
  DatasetInstance(const tp_host_t* h, Args&&... args) : host(h), dataset(std::forward<Args>(args)...) {
    if constexpr (HasFieldBatching<D>::value) batching = dataset.field_batching();
    if constexpr (HasSampleGroups<D>::value) group_ends = dataset.sample_groups();
    if constexpr (HasEncodedImages<D>::value) encoded = dataset.encoded_images();
    if constexpr (HasClassNames<D>::value) {
      classes = dataset.class_names();
      for (const std::string& name : classes.names) class_pointers.push_back(name.c_str());
      class_table = {sizeof(tp_class_names_t), static_cast<uint32_t>(class_pointers.size()), classes.field.c_str(),
                     class_pointers.data()};
    }
  }
  DatasetInstance(const DatasetInstance&) = delete;
  DatasetInstance& operator=(const DatasetInstance&) = delete;
  const tp_host_t* host;
  D dataset;
  std::vector<tp_field_batching_t> batching;
  std::vector<uint64_t> group_ends;
  std::vector<tp_encoded_image_t> encoded;
  ClassNames classes;
  std::vector<const char*> class_pointers; // into classes.names
  tp_class_names_t class_table{};          // lent by class_names() when classes.names is not empty
  // Built on the first sample_keys call only ([main]): a million file names cost memory that
  // training never needs.
  bool keys_built = false;
  std::vector<std::string> keys;
  std::vector<const char*> key_pointers;  // into keys
};

template <typename D, const tp_descriptor_t& kDescriptor>
struct DatasetAdapter {
  using Instance = DatasetInstance<D>;

  static const tp_host_t* host_of(const void* self) noexcept {
    return self != nullptr ? static_cast<const Instance*>(self)->host : plugin_host();
  }
  static Instance& instance(const void* self) {
    if (self == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component_name(kDescriptor)) + ": dataset instance is NULL");
    return *static_cast<Instance*>(const_cast<void*>(self));
  }

  /// `split` as a Split; throws Failure naming the dataset for a name it does not serve.
  static Split parse_split(const char* split) {
    const char* name = component_name(kDescriptor);
    const std::string requested = split != nullptr ? split : "(null)";
    if (requested == "train") return Split::kTrain;
    if (requested == "val") return Split::kVal;
    if (requested == "test" && HasTestSplit<D>::value) return Split::kTest;
    if (requested == "test")
      throw Failure(TP_ERR_UNSUPPORTED, std::string(name) +
                                            ": this dataset has no test split (it serves \"train\" and \"val\"); "
                                            "evaluate another table as [data.test] with a dataset that has one");
    throw Failure(TP_ERR_INVALID_ARGUMENT,
                  std::string(name) + ": unknown split '" + requested + "' (expected \"train\", \"val\" or \"test\")");
  }
  static const char* split_name(Split split) noexcept {
    return split == Split::kTrain ? "train" : split == Split::kVal ? "val" : "test";
  }

  static tp_status create(const tp_host_t* host, const tp_config_t* cfg, const char* split, void** out_self) {
    TP_GUARD(host != nullptr ? host : plugin_host(), {
      const char* name = component_name(kDescriptor);
      if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": out_self is NULL");
      *out_self = nullptr;
      const Split which = parse_split(split);
      const ConfigReader config(cfg, name);
      const DatasetArgs args{config, which, split_name(which), host, name};
      *out_self = new Instance(host, args);
      return TP_OK;
    });
  }

  static tp_status prepare(const tp_host_t* host, const tp_config_t* cfg, const char* split) {
    TP_GUARD(host != nullptr ? host : plugin_host(), {
      const Split which = parse_split(split);
      const ConfigReader config(cfg, component_name(kDescriptor));
      D::prepare(DatasetArgs{config, which, split_name(which), host, component_name(kDescriptor)});
      return TP_OK;
    });
  }

  // Fields already handed out own their buffers (make_field), so they outlive `self` (PLG-13).
  static void destroy(void* self) { delete static_cast<Instance*>(self); }

  static tp_status size(const void* self, uint64_t* out_count) {
    TP_GUARD(host_of(self), {
      if (out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component_name(kDescriptor)) + ": out_count is NULL");
      *out_count = static_cast<uint64_t>(static_cast<const D&>(instance(self).dataset).size());
      return TP_OK;
    });
  }

  static tp_status get_sample(const void* self, uint64_t index, const tp_worker_ctx_t* ctx, tp_field_t* out_fields,
                              uint32_t capacity, uint32_t* out_count) {
    TP_GUARD(host_of(self), {
      const char* name = component_name(kDescriptor);
      const D& dataset = instance(self).dataset;
      if (out_fields == nullptr || out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(name) + ": out_fields or out_count is NULL");
      *out_count = 0;
      const uint64_t count = static_cast<uint64_t>(dataset.size());
      if (index >= count)
        throw Failure(TP_ERR_OUT_OF_RANGE, std::string(name) + ": index " + std::to_string(index) +
                                               " is out of range (size " + std::to_string(count) + ")");
      Sample sample;
      dataset.get_sample(index, WorkerContext(ctx, name), sample);
      sample.hand_over(out_fields, capacity, out_count, name);
      return TP_OK;
    });
  }

  static tp_status set_epoch(void* self, uint64_t epoch) {
    TP_GUARD(host_of(self), {
      instance(self).dataset.set_epoch(epoch);
      return TP_OK;
    });
  }

  static tp_status field_batching(const void* self, const tp_field_batching_t** out_fields, uint32_t* out_count) {
    TP_GUARD(host_of(self), {
      if (out_fields == nullptr || out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT,
                      std::string(component_name(kDescriptor)) + ": out_fields or out_count is NULL");
      const std::vector<tp_field_batching_t>& batching = instance(self).batching;
      *out_fields = batching.data();
      *out_count = static_cast<uint32_t>(batching.size());
      return TP_OK;
    });
  }

  static tp_status sample_groups(const void* self, const uint64_t** out_group_ends, uint64_t* out_count) {
    TP_GUARD(host_of(self), {
      if (out_group_ends == nullptr || out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT,
                      std::string(component_name(kDescriptor)) + ": out_group_ends or out_count is NULL");
      const std::vector<uint64_t>& ends = instance(self).group_ends;
      *out_group_ends = ends.data();
      *out_count = static_cast<uint64_t>(ends.size());
      return TP_OK;
    });
  }

  static tp_status encoded_images(const void* self, const tp_encoded_image_t** out_images, uint32_t* out_count) {
    TP_GUARD(host_of(self), {
      if (out_images == nullptr || out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT,
                      std::string(component_name(kDescriptor)) + ": out_images or out_count is NULL");
      const std::vector<tp_encoded_image_t>& images = instance(self).encoded;
      *out_images = images.data();
      *out_count = static_cast<uint32_t>(images.size());
      return TP_OK;
    });
  }

  static tp_status class_names(const void* self, const tp_class_names_t** out_names) {
    TP_GUARD(host_of(self), {
      if (out_names == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component_name(kDescriptor)) + ": out_names is NULL");
      const Instance& lent = instance(self);
      *out_names = lent.classes.names.empty() ? nullptr : &lent.class_table;
      return TP_OK;
    });
  }

  static tp_status sample_keys(const void* self, const char* const** out_keys, uint64_t* out_count) {
    TP_GUARD(host_of(self), {
      if (out_keys == nullptr || out_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(component_name(kDescriptor)) + ": out_keys or out_count is NULL");
      Instance& lent = instance(self);
      if (!lent.keys_built) {
        lent.keys = lent.dataset.sample_keys();
        lent.key_pointers.clear();
        for (const std::string& key : lent.keys) lent.key_pointers.push_back(key.c_str());
        lent.keys_built = true;
      }
      *out_keys = lent.key_pointers.data();
      *out_count = static_cast<uint64_t>(lent.key_pointers.size());
      return TP_OK;
    });
  }

  static constexpr tp_dataset_v1_t table() {
    tp_dataset_v1_t t{sizeof(tp_dataset_v1_t), &create, &destroy, &size, &get_sample, nullptr, nullptr, nullptr,
                      nullptr, nullptr};
    if constexpr (HasSetEpoch<D>::value) t.set_epoch = &set_epoch;
    if constexpr (HasPrepare<D>::value) t.prepare = &prepare;
    if constexpr (HasFieldBatching<D>::value) t.field_batching = &field_batching;
    if constexpr (HasSampleGroups<D>::value) t.sample_groups = &sample_groups;
    if constexpr (HasEncodedImages<D>::value) t.encoded_images = &encoded_images;
    if constexpr (HasClassNames<D>::value) t.class_names = &class_names;
    if constexpr (HasSampleKeys<D>::value) t.sample_keys = &sample_keys;
    return t;
  }
};

template <typename D, const tp_descriptor_t& kDescriptor>
inline constexpr tp_dataset_v1_t kDatasetTable = DatasetAdapter<D, kDescriptor>::table();

}  // namespace detail

/// The descriptor of a dataset component: kind dataset, Tier S, the schema `keys` (PLG-6), and
/// `flags` (TP_DESCRIPTOR_SERIAL when get_sample is not thread-safe). All strings static.
template <std::size_t N>
constexpr tp_descriptor_t dataset_descriptor(const char* id, const char* version, const char* description,
                                             const tp_config_key_t (&keys)[N], uint32_t flags = 0) {
  return {sizeof(tp_descriptor_t), id, TP_KIND_DATASET, TP_TIER_S, version, description, keys,
          static_cast<uint32_t>(N), nullptr, 0, flags};
}

/// The component entry (descriptor, "tp.dataset/1", generated table) of dataset class `D`.
/// `kDescriptor` must have static storage (a namespace-scope constant).
template <typename D, const tp_descriptor_t& kDescriptor>
constexpr Component dataset_component() {
  return {&kDescriptor, TP_IFACE_DATASET_V1, &detail::kDatasetTable<D, kDescriptor>};
}

}  // namespace tp::cpp

/// Defines `tp_entry` of a Tier S library NAME (its .so base name) whose one component is the
/// dataset class CLASS described by DESCRIPTOR (a namespace-scope tp_descriptor_t).
#define TP_DEFINE_DATASET_PLUGIN(NAME, CLASS, DESCRIPTOR)                                        \
  namespace {                                                                                    \
  const ::tp::cpp::Component tp_detail_dataset_components[] = {                                  \
      ::tp::cpp::dataset_component<CLASS, DESCRIPTOR>()};                                        \
  }                                                                                              \
  TP_DEFINE_PLUGIN(NAME, TP_STABLE_BUILD_INFO_INIT, tp_detail_dataset_components)

#endif  // TP_CPP_DATASET_ADAPTER_H
