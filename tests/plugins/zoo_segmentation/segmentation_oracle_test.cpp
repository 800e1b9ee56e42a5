// segmentation.so against torchvision 0.29.1 itself, on the fixtures segmentation_oracle.py writes
// (its `run` mode, the ctest zoo_segmentation_oracle, sets TP_SEGMENTATION_FIXTURES and runs this
// case with --no-skip; a plain run of the binary skips it, as it needs .venv-bench). Per
// architecture: torchvision's state_dict loads by name and shape, and with it the eval-mode "out"
// and "aux", the training-mode ones (BatchNorm on batch statistics, the heads' dropout drawn after
// the same seed), every parameter's gradient of torchvision's criterion and the moved BatchNorm
// statistics equal torchvision's within kTolerance.
#include "zoo_segmentation/segmentation_support.h"

#include <cstdlib>

namespace {

using namespace tp::test;

/// Relative to the largest reference value (relative_difference): both sides run the same ATen
/// kernels in the same order, so anything above float32 rounding noise (~1e-7 relative per op,
/// accumulated over ~60 layers) is a wiring error, while a wrong layer moves the logits by O(1).
constexpr double kTolerance = 1e-5;
constexpr uint64_t kTrainSeed = 77;  // segmentation_oracle.py's TRAIN_SEED

std::filesystem::path fixture_dir() {
  const char* dir = std::getenv("TP_SEGMENTATION_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "run through segmentation_oracle.py run (ctest zoo_segmentation_oracle)");
  return dir;
}

/// max |a - b|.
double absolute_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// Compares `ours` with the fixture `key`: CHECKs the relative difference, keeps both maxima.
struct Worst {
  double relative = 0.0;
  double absolute = 0.0;
  void compare(const at::Tensor& ours, const at::Tensor& theirs) {
    REQUIRE(ours.sizes() == theirs.sizes());
    const double r = relative_difference(ours, theirs);
    CHECK(r <= kTolerance);
    relative = std::max(relative, r);
    absolute = std::max(absolute, absolute_difference(ours, theirs));
  }
};

TEST_CASE("segmentation: torchvision oracle: out, aux, gradients and statistics" * doctest::skip()) {
  const auto dir = fixture_dir();
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    const auto io = load_python_dict(dir / (arch + "_io.pt"));
    ZooModel m(kSegmentationLibrary, kSegmentationId, segmentation_config(arch, has_aux(arch)));
    load_weights(m, load_python_dict(dir / (arch + "_weights.pt")));
    Fields in = {{"image", io.at("x")}};
    std::vector<std::string> heads = {"out"};
    if (has_aux(arch)) heads.push_back("aux");

    Worst eval, train, grads, stats;
    m.train(false);
    {
      at::NoGradGuard no_grad;
      const auto outputs = m.forward(in);
      for (const auto& h : heads) eval.compare(outputs.at(h), io.at("eval." + h));
    }
    m.train(true);
    at::manual_seed(kTrainSeed);
    const auto outputs = m.forward(in);
    for (const auto& h : heads) train.compare(outputs.at(h).detach(), io.at("train." + h));
    segmentation_loss(outputs, io.at("target")).backward();
    for (const auto& e : m.state()) {
      CAPTURE(e.name);
      const at::Tensor& ours = tensor_of(e.handle);
      if (!e.is_buffer) grads.compare(ours.grad(), io.at("grad." + e.name));
      else if (ours.is_floating_point()) stats.compare(ours, io.at("after." + e.name));
      else CHECK(at::equal(ours, io.at("after." + e.name)));
    }
    MESSAGE(arch << " vs torchvision, max relative / absolute difference: eval " << eval.relative << " / "
                 << eval.absolute << ", train " << train.relative << " / " << train.absolute << ", gradients "
                 << grads.relative << " / " << grads.absolute << ", running statistics " << stats.relative << " / "
                 << stats.absolute);
  }
}

}  // namespace
