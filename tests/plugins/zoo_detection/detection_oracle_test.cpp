// detection.so against torchvision 0.29.1 itself, on the fixtures detection_oracle.py writes (its
// `run` mode, the ctest zoo_detection_oracle, sets TP_DETECTION_FIXTURES and runs these cases with
// --no-skip; a plain run of the binary skips them, as they need .venv-bench). For fcos_resnet50_fpn
// and a small ResNet-18 config, on torchvision's weights (BatchNorm statistics and the head
// randomised so that eval keeps many detections): the head's outputs and anchors in eval and
// training mode; the detections (thresholds, top-k, decoding, clipping to each image's true size,
// batched NMS, the per-image cut and the rescale to orig_size); the three training losses of
// org.torchhost.fcos_loss and the gradients of the total. And nms.cpp's batched_nms on both of
// torchvision's paths.
#include "zoo_detection/detection_support.h"

#include <algorithm>
#include <cstdlib>

#include "detection/nms.h"

namespace {

using namespace tp::test;

/// Relative to the largest reference value (relative_difference): both sides run the same ATen
/// kernels in the same order, so anything above float32 rounding (~1e-7 relative per op,
/// accumulated over ~70 layers and the loss's sums, which we round in another order) is a
/// wiring error; a wrong layer or a wrong assignment moves the values by O(1).
constexpr double kTolerance = 1e-5;
/// Detections, absolute (boxes in pixels up to ~500, scores in (0, 1)): rounding of the same
/// operations, far below any box or score a wrong decode, clip or rescale gives.
constexpr double kDetectionTolerance = 1e-4;

std::filesystem::path fixture_dir() {
  const char* dir = std::getenv("TP_DETECTION_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "run through detection_oracle.py run (ctest zoo_detection_oracle)");
  return dir;
}

double absolute_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0.0;
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// The largest differences seen, CHECKed against a bound.
struct Worst {
  double relative = 0.0;
  double absolute = 0.0;
  void compare(const at::Tensor& ours, const at::Tensor& theirs, double bound = kTolerance) {
    REQUIRE(ours.sizes() == theirs.sizes());
    const double r = relative_difference(ours, theirs);
    CHECK(r <= bound);
    relative = std::max(relative, r);
    absolute = std::max(absolute, absolute_difference(ours, theirs));
  }
};

/// detection_oracle.py's POSTPROCESS on the config.
ZooConfig oracle_config(const std::string& name) {
  ZooConfig c = fcos_config(fcos_shapes().at(name));
  c["score_thresh"] = 0.3;
  c["nms_thresh"] = 0.6;
  c["detections_per_img"] = int64_t{60};
  c["topk_candidates"] = int64_t{250};
  return c;
}

TEST_CASE("fcos: torchvision oracle: head, anchors, detections, losses and gradients" * doctest::skip()) {
  const auto dir = fixture_dir();
  for (const std::string name : {"resnet50", "small"}) {
    CAPTURE(name);
    const auto io = load_python_dict(dir / (name + "_io.pt"));
    ZooModel m(kDetectionLibrary, kFcosId, oracle_config(name));
    load_weights(m, load_python_dict(dir / (name + "_weights.pt")));
    Fields in = {{"image", io.at("x")}, {"image_lengths", io.at("image_lengths")}, {"orig_size", io.at("orig_size")}};
    const char* heads[] = {"cls_logits", "bbox_regression", "bbox_ctrness"};

    Worst eval, train, losses, grads;
    double box_worst = 0.0, score_worst = 0.0;
    m.train(false);
    {
      at::NoGradGuard no_grad;
      const auto out = m.forward(in);
      for (const char* h : heads) eval.compare(out.at(h), io.at(std::string("eval.") + h));
      CHECK(at::equal(out.at("anchors")[0], io.at("anchors")));
      // Detections: the same count per image, and row by row the same label, box and score.
      const at::Tensor offsets = out.at("detection_scores_offsets");
      CHECK(at::equal(offsets, io.at("det.offsets")));
      CHECK(at::equal(out.at("detection_boxes_offsets"), offsets));
      CHECK(at::equal(out.at("detection_labels_offsets"), offsets));
      REQUIRE(out.at("detection_scores").size(0) == io.at("det.scores").size(0));
      CHECK(at::equal(out.at("detection_labels"), io.at("det.labels")));
      box_worst = absolute_difference(out.at("detection_boxes"), io.at("det.boxes"));
      score_worst = absolute_difference(out.at("detection_scores"), io.at("det.scores"));
      CHECK(box_worst <= kDetectionTolerance);
      CHECK(score_worst <= kDetectionTolerance);
    }

    m.train(true);
    const auto out = m.forward(in);
    for (const char* h : heads) train.compare(out.at(h).detach(), io.at(std::string("train.") + h));
    FcosLossInstance loss;
    Fields outputs = loss_outputs(out);
    Fields targets = ragged_targets(io.at("boxes"), io.at("labels"), io.at("boxes_offsets"));
    const auto [sum, count] = loss.forward(outputs, targets);
    // torchvision's loss dict holds each sum divided by max(1, foreground), as the host divides.
    for (const auto& [term, value] : loss.terms()) losses.compare(value / count, io.at("loss." + term));
    const at::Tensor total = io.at("loss.classification") + io.at("loss.bbox_regression") + io.at("loss.bbox_ctrness");
    losses.compare((sum / count).detach(), total);
    (sum / count).backward();
    for (const auto& e : m.state()) {
      if (io.count("grad." + e.name) == 0) continue;
      CAPTURE(e.name);
      grads.compare(tensor_of(e.handle).grad(), io.at("grad." + e.name));
    }
    MESSAGE(name << " vs torchvision, max relative / absolute difference: eval head " << eval.relative << " / "
                 << eval.absolute << ", train head " << train.relative << " / " << train.absolute << ", losses "
                 << losses.relative << " / " << losses.absolute << ", gradients " << grads.relative << " / "
                 << grads.absolute << "; detections (" << io.at("det.scores").size(0)
                 << ", labels equal) boxes " << box_worst << ", scores " << score_worst << " absolute; "
                 << count.item<int64_t>() << " foreground locations");
  }
}

TEST_CASE("fcos: torchvision oracle: batched_nms on both paths and nms keep torchvision's indices" * doctest::skip()) {
  const auto io = load_python_dict(fixture_dir() / "nms.pt");
  // 300 boxes: the coordinate trick (numel 1200 <= 4000); 1500: one nms per class.
  for (const std::string n : {"300", "1500"}) {
    CAPTURE(n);
    const at::Tensor boxes = io.at("nms." + n + ".boxes"), scores = io.at("nms." + n + ".scores");
    CHECK(at::equal(tp::detection::batched_nms(boxes, scores, io.at("nms." + n + ".idxs"), 0.5),
                    io.at("nms." + n + ".keep")));
    CHECK(at::equal(tp::detection::nms(boxes, scores, 0.5), io.at("nms." + n + ".plain")));
  }
}

}  // namespace
