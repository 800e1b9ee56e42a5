// org.torchhost.mean_iou through the C ABI, on a hand-made confusion matrix worked out below.
// torchmetrics is the oracle on random masks in tests/plugins/metrics/segmentation_oracle.
#include "metric_instance.h"

namespace {

using namespace tp::test;

constexpr const char* kSegmentationMetricId = "org.torchhost.mean_iou";

// Two 2x2 images, three classes; predictions by one-hot logits. Pixels in memory order:
//   predicted [0, 0, 1, 1,   2, 2, 0, 1]
//   target    [0, 1, 1, 255, 2, 0, 0, 1]   (255: ignored, never counted)
// Confusion (rows target, columns prediction): [[2, 0, 1], [1, 2, 0], [0, 0, 1]].
//   IoU 0 = 2 / (3 + 3 - 2) = 1/2, IoU 1 = 2 / (3 + 2 - 2) = 2/3, IoU 2 = 1 / (1 + 2 - 1) = 1/2
//   miou = 5/9; pixel accuracy = 5/7; recalls 2/3, 2/3, 1 -> mean accuracy 7/9.
const at::Tensor kPredicted = at::tensor({0, 0, 1, 1, 2, 2, 0, 1}, at::kLong);
const at::Tensor kMask = at::tensor({0, 1, 1, 255, 2, 0, 0, 1}, at::kLong).reshape({2, 2, 2});

/// [2, classes, 2, 2] logits whose argmax is kPredicted.
at::Tensor logits_of(const at::Tensor& predicted, int64_t classes) {
  return at::one_hot(predicted, classes).to(at::kFloat).reshape({2, 2, 2, classes}).permute({0, 3, 1, 2});
}

std::map<std::string, FakeConfig::Value> classes(int64_t k) { return {{"num_classes", k}}; }

TEST_CASE("segmentation: IoU, mean IoU, pixel and mean accuracy from the confusion matrix") {
  Fields out{{"out", logits_of(kPredicted, 3)}};
  Fields tgt{{"mask", kMask}};
  Metric seg(kSegmentationMetricId, classes(3));
  seg.update(out, tgt);
  const auto state = seg.state();
  REQUIRE(state.size() == 2);
  CHECK(at::equal(state[0], at::tensor({2, 0, 1, 1, 2, 0, 0, 0, 1}, at::kLong).reshape({3, 3})));
  CHECK(state[1].item<int64_t>() == 0);
  const auto v = seg.compute();
  CHECK(v.size() == 6);
  CHECK(v.at("iou_0") == doctest::Approx(0.5));
  CHECK(v.at("iou_1") == doctest::Approx(2.0 / 3.0));
  CHECK(v.at("iou_2") == doctest::Approx(0.5));
  CHECK(v.at("miou") == doctest::Approx(5.0 / 9.0));
  CHECK(v.at("pixel_accuracy") == doctest::Approx(5.0 / 7.0));
  CHECK(v.at("mean_accuracy") == doctest::Approx(7.0 / 9.0));

  // A fourth class, never in the target nor predicted: IoU 0 (torchmetrics' zero_division), left
  // out of both means.
  Fields out4{{"out", logits_of(kPredicted, 4)}};
  Metric seg4(kSegmentationMetricId, classes(4));
  seg4.update(out4, tgt);
  const auto v4 = seg4.compute();
  CHECK(v4.at("iou_3") == 0.0);
  CHECK(v4.at("miou") == doctest::Approx(5.0 / 9.0));
  CHECK(v4.at("mean_accuracy") == doctest::Approx(7.0 / 9.0));
  // Predicted but never in the target: IoU 0 and counted in the mean (as torchmetrics).
  Fields out_fp{{"out", logits_of(at::tensor({0, 0, 1, 1, 2, 2, 0, 3}, at::kLong), 4)}};
  Metric seg_fp(kSegmentationMetricId, classes(4));
  seg_fp.update(out_fp, tgt);
  const auto fp = seg_fp.compute();
  CHECK(fp.at("iou_3") == 0.0);
  CHECK(fp.at("iou_1") == doctest::Approx(1.0 / 3.0));  // 1 / (3 + 1 - 1)
  CHECK(fp.at("miou") == doctest::Approx((0.5 + 1.0 / 3.0 + 0.5 + 0.0) / 4.0));
}

TEST_CASE("segmentation: two ranks' states summed equal one pass") {
  Fields out{{"out", logits_of(kPredicted, 3)}};
  Fields tgt{{"mask", kMask}};
  Metric whole(kSegmentationMetricId, classes(3));
  whole.update(out, tgt);

  Metric rank0(kSegmentationMetricId, classes(3)), rank1(kSegmentationMetricId, classes(3));
  Fields out_a{{"out", out.items[0].second.slice(0, 0, 1)}}, tgt_a{{"mask", kMask.slice(0, 0, 1)}};
  Fields out_b{{"out", out.items[0].second.slice(0, 1, 2)}}, tgt_b{{"mask", kMask.slice(0, 1, 2)}};
  rank0.update(out_a, tgt_a);
  rank1.update(out_b, tgt_b);
  CHECK_FALSE(equal_states(whole.state(), rank0.state()));
  // The host's all-reduce adds the other rank's state in place through the visited handles.
  const auto theirs = rank1.state();
  const auto mine = visit_all(rank0.t->visit_state, rank0.self);
  REQUIRE(mine.size() == theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) tensor_of(mine[i].handle).add_(theirs[i]);
  CHECK(equal_states(whole.state(), rank0.state()));
  CHECK(whole.compute() == rank0.compute());  // bitwise: the same counts give the same doubles

  REQUIRE(rank0.t->reset(rank0.self) == TP_OK);
  for (const at::Tensor& s : rank0.state()) CHECK(s.eq(0).all().item<bool>());
  const auto empty = rank0.compute();  // nothing counted: the means are undefined, not 0
  CHECK(std::isnan(empty.at("miou")));
  CHECK(std::isnan(empty.at("pixel_accuracy")));
  CHECK(std::isnan(empty.at("mean_accuracy")));
  CHECK(empty.at("iou_0") == 0.0);
}

TEST_CASE("segmentation: an all-ignored batch counts nothing; ignore_index inside [0, K) as torchmetrics") {
  Metric seg(kSegmentationMetricId, classes(3));
  Fields out{{"out", logits_of(kPredicted, 3)}};
  Fields ignored{{"mask", at::full({2, 2, 2}, 255, at::kLong)}};
  seg.update(out, ignored);
  CHECK(seg.state()[0].sum().item<int64_t>() == 0);

  // ignore_index = 0 on target [0, 1, 1, 2, 2, 0, 0, 1]: the class-0 pixels are dropped, leaving
  // confusion [[0, 0, 0], [1, 2, 0], [0, 1, 1]]. Class 0 (predicted once, never a target pixel)
  // has IoU 0 and is left out of miou = (1/2 + 1/2) / 2, but its recall 0 counts in the mean
  // accuracy (0 + 2/3 + 1/2) / 3: torchmetrics' MulticlassJaccardIndex and MulticlassAccuracy.
  Metric in_range(kSegmentationMetricId, {{"num_classes", int64_t{3}}, {"ignore_index", int64_t{0}}});
  Fields tgt{{"mask", at::tensor({0, 1, 1, 2, 2, 0, 0, 1}, at::kLong).reshape({2, 2, 2})}};
  in_range.update(out, tgt);
  const auto v = in_range.compute();
  CHECK(v.at("iou_0") == 0.0);
  CHECK(v.at("miou") == doctest::Approx(0.5));
  CHECK(v.at("pixel_accuracy") == doctest::Approx(3.0 / 5.0));
  CHECK(v.at("mean_accuracy") == doctest::Approx(7.0 / 18.0));
}

TEST_CASE("segmentation: targets outside the classes fail compute; misshapen inputs fail update") {
  LoadedPlugin& p = plugin("basic_metrics");
  Fields out{{"out", logits_of(kPredicted, 3)}};
  // update may not read values back (PLG-11), so bad labels are counted and compute refuses them.
  Metric seg(kSegmentationMetricId, classes(3));
  Fields bad{{"mask", at::tensor({0, 1, 3, 255, 2, -1, 0, 1}, at::kLong).reshape({2, 2, 2})}};
  seg.update(out, bad);
  tp_scalar_t values[64];
  uint32_t n = 0;
  CHECK(seg.t->compute(seg.self, values, 64, &n) == TP_ERR_INVALID_ARGUMENT);
  CHECK_MESSAGE(p.host.last_error.find("2 pixels of target 'mask' are neither a class in [0, 3) nor ignore_index 255") !=
                    std::string::npos,
                p.host.last_error);

  Metric four(kSegmentationMetricId, classes(4));
  Fields tgt{{"mask", kMask}};
  CHECK(four.t->update(four.self, out.view(), out.size(), tgt.view(), tgt.size()) == TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("[B, 4, ...] (num_classes 4)") != std::string::npos);
  Fields float_mask{{"mask", kMask.to(at::kFloat)}};
  CHECK(seg.t->update(seg.self, out.view(), out.size(), float_mask.view(), float_mask.size()) == TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("integer mask 'mask'") != std::string::npos);
}

TEST_CASE("segmentation: one IoU per class for ADE20K's 150 classes (the host's 8192 values); an older host's 64 fail clearly") {
  Fields out{{"out", logits_of(kPredicted, 150)}};
  Fields tgt{{"mask", kMask}};
  Metric wide(kSegmentationMetricId, classes(150));
  wide.update(out, tgt);
  const auto v = wide.compute();
  CHECK(v.size() == 153);
  CHECK(v.at("iou_149") == 0.0);
  CHECK(v.at("iou_100") == 0.0);
  CHECK(v.at("iou_1") == doctest::Approx(2.0 / 3.0));
  CHECK(v.at("miou") == doctest::Approx(5.0 / 9.0));

  // A host built before TP_METRIC_VALUE_CAPACITY offered 64 values: compute() fails naming the
  // count, and never hands over a cut list.
  tp_scalar_t room[64];
  uint32_t count = 7;
  CHECK(wide.t->compute(wide.self, room, 64, &count) == TP_ERR_INVALID_ARGUMENT);
  CHECK(count == 0);
  CHECK(wide.p.host.last_error.find("153 values but capacity is 64") != std::string::npos);

  Metric widest(kSegmentationMetricId, classes(4096));
  Fields out4096{{"out", logits_of(kPredicted, 4096)}};
  widest.update(out4096, tgt);
  const auto all = widest.compute();
  CHECK(all.size() == 4099);
  CHECK(all.count("iou_4095") == 1);

  Metric ade(kSegmentationMetricId, {{"num_classes", int64_t{150}}, {"per_class", false}});
  CHECK(ade.state()[0].sizes() == at::IntArrayRef({150, 150}));
  Fields out150{{"out", logits_of(kPredicted, 150)}};
  ade.update(out150, tgt);
  const auto summary = ade.compute();
  CHECK(summary.size() == 3);
  CHECK(summary.at("pixel_accuracy") == doctest::Approx(5.0 / 7.0));
}

}  // namespace
