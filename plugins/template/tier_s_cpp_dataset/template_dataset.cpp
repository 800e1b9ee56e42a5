// template_dataset: a complete Tier S dataset in C++, to copy and edit.
//
// Component org.example.blobs (kind dataset, "tp.dataset/1") serves a classification task that
// needs no files: `classes` clusters ("blobs") in a `features`-dimensional space. Each sample is
//   features  float32 [features]  a point near the centre of its class
//   label     int64   []          its class, a scalar: a batch of B samples becomes an int64 [B]
//                                 tensor of class indices, what cross_entropy and accuracy read
// and the built-in org.torchhost.mlp learns it in seconds (run.toml, beside this file).
// Tier S means: no LibTorch, only the stable C ABI of plugin_api/ (with its header-only C++
// helpers), so this library keeps loading when the host upgrades LibTorch (PLG-14).
//
// The four parts of every plugin, in order: schema, descriptor, the component's class, entry. The
// rules each part follows are the PLG-n rows of plugin_api/README.md (installed:
// share/torchhost/README.md).
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tp/cpp/dataset_adapter.h"
#include "tp/cpp/random.h"
#include "tp/tp.h"

namespace {

/* 1. Schema: every key of the component's TOML table, with type, default (a TOML literal) and
 *    help (PLG-6). The host checks the user's [data.train] / [data.val] / [data.test] table
 *    against it and fills in the defaults before create(). The host has no size key of its own:
 *    a dataset that serves several splits from one table declares one size per split. */
const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "size", TP_CFG_INT, "2000", "samples in the train split"},
    {sizeof(tp_config_key_t), "val_size", TP_CFG_INT, "500", "samples in the val split"},
    {sizeof(tp_config_key_t), "test_size", TP_CFG_INT, "500", "samples in the test split (host eval --split test)"},
    {sizeof(tp_config_key_t), "features", TP_CFG_INT, "8", "length of each sample's feature vector"},
    {sizeof(tp_config_key_t), "classes", TP_CFG_INT, "3", "number of classes (labels 0 .. classes-1)"},
    {sizeof(tp_config_key_t), "spread", TP_CFG_FLOAT, "0.3",
     "half-width of the box around its class centre a sample is drawn from"},
    {sizeof(tp_config_key_t), "seed", TP_CFG_INT, "0",
     "content seed: which samples the dataset holds; independent of the run seed"},
    {sizeof(tp_config_key_t), "jitter", TP_CFG_FLOAT, "0.0",
     "train augmentation: noise of this half-width added anew each epoch (0: none)"},
};

/* 2. Descriptor: static storage, valid until deinit(). The id is reverse-DNS and yours (PLG-5);
 *    tp::cpp::dataset_descriptor fills in struct_size, kind and tier (PLG-2). */
const tp_descriptor_t kDescriptor = tp::cpp::dataset_descriptor(
    "org.example.blobs", "0.1.0", "float features around per-class centres; int64 scalar label (template)", kKeys);

/// A uniform float in [-1, 1) from 64 random bits (the top 24 bits: exact in a float).
float unit(uint64_t bits) { return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f; }

/* 3. The dataset. tp/cpp/dataset_adapter.h turns this class into the C table: it checks the
 *    split and the index, wraps every call in TP_GUARD so an exception becomes a status plus a
 *    message (PLG-7), hands the fields over only when get_sample returns normally (PLG-9) and
 *    accepts destroy(NULL) (PLG-12). No global state: two instances never interfere. */
class Blobs {
 public:
  /// Also serve the split "test", which `host eval --split test` and `host predict --split test`
  /// ask for (ABI 1.5). Without this line the adapter refuses "test", so a dataset that would
  /// treat every split but train as val never passes its val samples off as a test set.
  static constexpr bool kHasTestSplit = true;

  /// [main] One instance per split, built from the validated table; copy what you need, the view
  /// dies when create() returns. Throwing refuses the config; get_int_in's message names the
  /// component and the key ("blobs: classes = 0 is outside [1, 1000]").
  explicit Blobs(const tp::cpp::DatasetArgs& args)
      : count_(static_cast<uint64_t>(args.config.get_int_in(
            args.train() ? "size" : args.test() ? "test_size" : "val_size", 1, int64_t{1} << 40))),
        split_(args.train() ? 0 : args.test() ? 2 : 1),
        features_(static_cast<size_t>(args.config.get_int_in("features", 1, 1 << 16))),
        classes_(static_cast<uint64_t>(args.config.get_int_in("classes", 1, 1000))),
        spread_(static_cast<float>(args.config.get_float_in("spread", 0.0, 100.0))),
        seed_(static_cast<uint64_t>(args.config.get_int("seed"))),
        // Augmentation belongs to training; val and test samples stay exactly as they are.
        jitter_(args.train() ? static_cast<float>(args.config.get_float_in("jitter", 0.0, 100.0)) : 0.0f) {}

  /// [any] The split's sample count; constant for the instance's life.
  uint64_t size() const { return count_; }

  /// [worker] Sample `index`. Called from several loader threads at once (PLG-10), hence const
  /// and no mutable state. What sample i *is* must be a pure function of the config, the split and
  /// i (PLG-8): the loader's order, its worker count and the rank that reads it never change
  /// it, and `host plugins check` reads each sample twice to see that it does not.
  void get_sample(uint64_t index, const tp::cpp::WorkerContext& ctx, tp::cpp::Sample& out) const {
    // Content: one key per (seed, split, index) drives every draw of this sample. splitmix64 is
    // fixed forever (tp/cpp/random.h), so the dataset holds the same samples in every release.
    using tp::cpp::splitmix64;
    tp::cpp::SplitMix64 draws(splitmix64(splitmix64(splitmix64(seed_) ^ split_) ^ index));
    const uint64_t label = draws.next() % classes_;
    std::vector<float> x(features_);
    for (size_t j = 0; j < features_; ++j) x[j] = centre(label, j) + spread_ * unit(draws.next());

    // Augmentation: from the host's per-sample seed only, which mixes in the run seed, the epoch
    // and the rank, so each epoch sees new noise and a resumed run sees the same noise again.
    // seed("jitter") is that seed whatever its argument (which only names the use in errors): one
    // stream. Draws that must be independent of each other (two augmented views of a sample)
    // each take a stream of their own, ctx.stream_seed("view_0"), ctx.stream_seed("view_1").
    if (jitter_ > 0.0f) {
      tp::cpp::SplitMix64 noise(ctx.seed("jitter"));
      for (float& v : x) v += jitter_ * unit(noise.next());
    }

    // Every sample of a split has the same field names, dtypes and shapes (the loader stacks
    // them). Shape {} makes `label` a scalar (ndim 0); a label of shape {1} would batch as
    // [B, 1], which cross_entropy refuses. The field names are what the model (`input`), the loss
    // and the metrics (`target`, default "label") name.
    out.add("features", std::move(x), {static_cast<int64_t>(features_)});
    out.add("label", std::vector<int64_t>{static_cast<int64_t>(label)}, {});
  }

 private:
  /// Coordinate j of the centre of class c, in [-1, 1): a function of the content seed only, so
  /// the train, val and test splits share their classes.
  float centre(uint64_t c, size_t j) const {
    using tp::cpp::splitmix64;
    return unit(splitmix64(splitmix64(splitmix64(seed_ ^ 0x5eedULL) ^ c) ^ j));
  }

  uint64_t count_;
  uint64_t split_;  // 0 train, 1 val, 2 test: part of every sample's key
  size_t features_;
  uint64_t classes_;
  float spread_;
  uint64_t seed_;
  float jitter_;    // 0 outside the train split
};

}  // namespace

/* 4. Entry: TP_DEFINE_DATASET_PLUGIN emits the one exported symbol, tp_entry, for a library whose
 *    one component is this class, with TP_STABLE_BUILD_INFO_INIT (Tier S, PLG-4). The name must
 *    equal the .so base name (PLG-1). */
TP_DEFINE_DATASET_PLUGIN("template_dataset", Blobs, kDescriptor)
