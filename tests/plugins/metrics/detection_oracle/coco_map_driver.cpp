// Driver of the COCO mAP oracle (coco_map_oracle.py): runs detection_metrics'
// org.torchhost.coco_map through its C ABI on random batches of ragged detections and ground
// truth, and writes the inputs and the values: once as one process ("one"), and as two ranks
// taking alternate batches whose gathered rows are concatenated rank 0 then rank 1, as the host
// does (visit_gathered_state, Tensor::set_), and as rank 1 then rank 0 ("two", "two_swapped").
// The batches hold what changes COCO numbers: objects of every size class, crowd regions, given
// areas (0 among them) and, in one batch without an `areas` field, box areas, images without objects or without detections, more than 100 detections in one
// image, a class with objects but no detection and one with detections but no object, and scores
// on a 0.05 grid so that many tie within and across images.
// Usage: coco_map_driver <detection_metrics.so> <output dir>
#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/fake_host.h"
#include "tp/iface/metric.h"

namespace {

using tp::test::FakeConfig;

constexpr int64_t kClasses = 5;  // class 3: objects, never detected; class 4: detected, no object
/// num_classes as COCO's category ids need it: 91 per-class values and the 12 summary ones, past
/// the 64 values a host read before TP_METRIC_VALUE_CAPACITY. Classes 5 to 90 have no object: AP -1.
constexpr int64_t kConfiguredClasses = 91;
constexpr int kNoAreasBatch = 3;  // the batch without an `areas` field: every object has its box's area

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "coco_map_driver: %s\n", what.c_str());
  std::exit(1);
}

tp_tensor handle_of(const at::Tensor& t) { return reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&t)); }

std::string write(const at::Tensor& t, const std::string& dir, const std::string& name) {
  const at::Tensor c = t.contiguous().cpu();
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  return name;
}

struct Batch {
  std::vector<std::pair<std::string, at::Tensor>> outputs, targets;
};

/// Random boxes [n, 4] x1, y1, x2, y2 in a 320 x 320 image, sides 4 to ~150 (every size class).
at::Tensor random_boxes(int64_t n) {
  const at::Tensor corner = at::rand({n, 2}) * 200;
  const at::Tensor side = at::exp(at::rand({n, 2}) * 3.6 + 1.4);  // e^1.4 = 4 .. e^5 = 148
  return at::cat({corner, corner + side}, 1).to(at::kFloat);
}

/// One batch of `images` samples with ids from `first_id`.
Batch make_batch(int64_t images, int64_t first_id, bool with_areas) {
  std::vector<at::Tensor> gt_boxes, gt_labels, crowd, areas, boxes, scores, labels;
  std::vector<int64_t> gt_offsets{0}, det_offsets{0};
  for (int64_t i = 0; i < images; ++i) {
    const int64_t id = first_id + i;
    const int64_t objects = id % 7 == 3 ? 0 : at::randint(1, 9, {1}).item<int64_t>();
    const at::Tensor truth = random_boxes(objects);
    const at::Tensor truth_labels = at::randint(0, kClasses - 1, {objects}, at::kLong);  // never class 4
    gt_boxes.push_back(truth);
    gt_labels.push_back(truth_labels);
    crowd.push_back(at::rand({objects}).lt(0.1).to(at::kLong));
    // Given areas, as COCO's polygon areas differ from boxes; a fifth of them 0, as converters
    // write "area": 0, which pycocotools keeps (a small object whatever its box). Batch 3 gives
    // no areas at all: the boxes' then (see kNoAreasBatch).
    areas.push_back((at::rand({objects}) * 12000).mul(at::rand({objects}).gt(0.2)));
    gt_offsets.push_back(gt_offsets.back() + objects);

    // Detections: jittered copies of the objects (class 3 never), false positives, and in image 5
    // a flood of 130 (past maxDets 100); image id % 5 == 4 gets none.
    at::Tensor found = truth.index({truth_labels.ne(3)});
    at::Tensor found_labels = truth_labels.index({truth_labels.ne(3)});
    // Jitter of 8% of the box's sides: IoUs spread over the whole 0.5 .. 0.95 range.
    const at::Tensor sides = (found.narrow(1, 2, 2) - found.narrow(1, 0, 2)).repeat({1, 2});
    found = found + at::randn(found.sizes()) * sides * 0.08;
    const int64_t extra = id == 5 ? 130 : at::randint(0, 4, {1}).item<int64_t>();
    found = at::cat({found, random_boxes(extra)});
    found_labels = at::cat({found_labels, at::randint(0, kClasses, {extra}, at::kLong)});
    found_labels.masked_fill_(found_labels.eq(3), 4);
    if (id % 5 == 4) {
      found = found.narrow(0, 0, 0);
      found_labels = found_labels.narrow(0, 0, 0);
    }
    const int64_t n = found.size(0);
    boxes.push_back(found.to(at::kFloat));
    labels.push_back(found_labels);
    scores.push_back((at::randint(1, 21, {n}).to(at::kFloat) * 0.05f));  // ties within and across images
    det_offsets.push_back(det_offsets.back() + n);
  }
  const auto offsets = [](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); };
  Batch b;
  b.outputs = {{"detection_boxes", at::cat(boxes)},
               {"detection_boxes_offsets", offsets(det_offsets)},
               {"detection_scores", at::cat(scores)},
               {"detection_labels", at::cat(labels)}};
  b.targets = {{"boxes", at::cat(gt_boxes)},
               {"boxes_offsets", offsets(gt_offsets)},
               {"labels", at::cat(gt_labels)},
               {"iscrowd", at::cat(crowd)},
               {"image_id", at::arange(first_id, first_id + images, at::kLong)}};
  if (with_areas) b.targets.emplace_back("areas", at::cat(areas).to(at::kFloat));
  return b;
}

struct Metric {
  tp::test::FakeHost& host;
  const tp_metric_v1_t* t = nullptr;
  void* self = nullptr;
  /// `batch_targets`: the ground truth's names left "" (the default), for the batch's own fields.
  Metric(const tp_plugin_entry_t* entry, tp::test::FakeHost& h, bool batch_targets = false) : host(h) {
    t = static_cast<const tp_metric_v1_t*>(entry->get_interface("org.torchhost.coco_map", TP_IFACE_METRIC_V1));
    FakeConfig cfg;
    cfg.values = {{"num_classes", kConfiguredClasses},
                  {"boxes", std::string("detection_boxes")},
                  {"scores", std::string("detection_scores")},
                  {"labels", std::string("detection_labels")},
                  {"target_boxes", std::string("boxes")},
                  {"target_labels", std::string("labels")},
                  {"image_id", std::string("image_id")},
                  {"iscrowd", std::string("iscrowd")},
                  {"areas", std::string("areas")},
                  {"per_class", true}};
    if (batch_targets)
      for (const char* key : {"target_boxes", "target_labels", "iscrowd", "areas"}) cfg.values[key] = std::string();
    if (t == nullptr || t->visit_gathered_state == nullptr || t->create(&host.host, &cfg.view, &self) != TP_OK ||
        t->to_device(self, TP_DEVICE_CPU, 0) != TP_OK || t->reset(self) != TP_OK)
      fail("create: " + host.last_error);
  }
  ~Metric() { t->destroy(self); }
  void update(const Batch& b) {
    std::vector<tp_named_tensor_t> out, tgt;
    for (const auto& [name, tensor] : b.outputs) out.push_back({name.c_str(), handle_of(tensor)});
    for (const auto& [name, tensor] : b.targets) tgt.push_back({name.c_str(), handle_of(tensor)});
    if (t->update(self, out.data(), static_cast<uint32_t>(out.size()), tgt.data(), static_cast<uint32_t>(tgt.size())) != TP_OK)
      fail("update: " + host.last_error);
  }
  std::vector<at::Tensor> gathered() {
    std::vector<at::Tensor> out;
    const tp_status status = t->visit_gathered_state(self, [](void* user, const char*, tp_tensor h, bool) {
      static_cast<std::vector<at::Tensor>*>(user)->push_back(*reinterpret_cast<at::Tensor*>(h));  // shares the TensorImpl
      return tp_status{TP_OK};
    }, &out);
    if (status != TP_OK) fail("visit_gathered_state: " + host.last_error);
    return out;
  }
  /// What the host's gather does: every state becomes first's rows then second's, in place.
  static void gather(Metric& first, Metric& second) {
    std::vector<at::Tensor> a = first.gathered(), b = second.gathered();
    std::vector<at::Tensor> all;
    for (size_t i = 0; i < a.size(); ++i) all.push_back(at::cat({a[i], b[i]}));
    for (size_t i = 0; i < a.size(); ++i) {
      a[i].set_(all[i]);
      b[i].set_(all[i].clone());
    }
  }
  std::string values() {
    std::vector<tp_scalar_t> v(TP_METRIC_VALUE_CAPACITY);
    uint32_t n = 0;
    if (t->compute(self, v.data(), TP_METRIC_VALUE_CAPACITY, &n) != TP_OK) fail("compute: " + host.last_error);
    std::string line;
    char item[96];
    for (uint32_t i = 0; i < n; ++i) {
      std::snprintf(item, sizeof item, " %s %.17g", v[i].name, v[i].value);
      line += item;
    }
    return line;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: coco_map_driver <detection_metrics.so> <output dir>");
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) fail(dlerror());
  const auto* entry = static_cast<const tp_plugin_entry_t*>(dlsym(library, TP_ENTRY_SYMBOL));
  tp::test::FakeHost host;
  host.host.tensor_release = [](const tp_host_t*, tp_tensor h) { delete reinterpret_cast<at::Tensor*>(h); };
  if (entry == nullptr || entry->init(&host.host) != TP_OK) fail("init failed");
  const std::string dir = argv[2];
  std::ofstream manifest(dir + "/manifest.txt");
  at::manual_seed(7);
  Metric one(entry, host), rank0(entry, host), rank1(entry, host), swapped0(entry, host), swapped1(entry, host);
  // coco_detection's val batches: gt_* in the file's pixels beside the resized training boxes. With
  // the target names left "", the metric reads gt_* (it read `boxes`: a trial's FCOS scored mAP
  // 0.00086 for 0.204), so it must equal `one` fed the truth under the plain names.
  Metric batch_fields(entry, host, /*batch_targets=*/true);
  const int64_t batch_sizes[] = {3, 4, 1, 5, 2, 4};
  int64_t next_id = 0;
  for (int i = 0; i < 6; ++i) {
    const Batch b = make_batch(batch_sizes[i], next_id, /*with_areas=*/i != kNoAreasBatch);
    next_id += batch_sizes[i];
    one.update(b);
    Batch coco = b;
    coco.targets.clear();
    for (const auto& [name, tensor] : b.targets) {
      coco.targets.emplace_back(name == "image_id" ? name : "gt_" + name, tensor);
      // The resized training boxes and their labels: decoys the metric must not read.
      if (name == "boxes" || name == "boxes_offsets" || name == "labels")
        coco.targets.emplace_back(name, name == "boxes" ? tensor * 0.5 : tensor);
    }
    batch_fields.update(coco);
    (i % 2 == 0 ? rank0 : rank1).update(b);
    (i % 2 == 0 ? swapped1 : swapped0).update(b);
    manifest << "batch " << i << " images " << batch_sizes[i];
    for (const auto* part : {&b.outputs, &b.targets})
      for (const auto& [name, tensor] : *part)
        manifest << " " << name << " " << write(tensor, dir, "b" + std::to_string(i) + "_" + name + ".bin") << " "
                 << (tensor.scalar_type() == at::kLong ? "int64" : "float32") << " " << tensor.numel();
    manifest << "\n";
  }
  Metric::gather(rank0, rank1);
  Metric::gather(swapped0, swapped1);
  manifest << "values one" << one.values() << "\n";
  manifest << "values two" << rank0.values() << "\n";
  manifest << "values two_rank1" << rank1.values() << "\n";
  manifest << "values two_swapped" << swapped0.values() << "\n";
  if (batch_fields.values() != one.values())
    fail("with the target names left \"\", the metric did not read the batch's gt_* fields:" + batch_fields.values() +
         " against" + one.values());
  // reset empties the rows: a second evaluation starts from nothing.
  if (one.t->reset(one.self) != TP_OK) fail("reset: " + host.last_error);
  manifest << "values after_reset" << one.values() << "\n";
  return 0;
}
