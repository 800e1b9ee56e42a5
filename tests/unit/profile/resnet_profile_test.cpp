// ResNet-18 and ResNet-50 (org.torchhost.resnet, torchvision's architecture) at 224x224: the
// parameter counts are exactly torchvision's, and the counted MACs are within 1% of the published
// 1.814 G and 4.089 G per image (torchvision's model docs list GFLOPS 1.81 / 4.09 = GMACs; bias
// and elementwise work not included, as here).
#include "profile_test_util.h"

#include <cmath>

#include "tp/framework/plugin/model_inputs.h"
#include "tp/framework/profile/model_profile.h"

namespace {

using namespace tp;

void check_resnet(int64_t depth, int64_t parameters, double published_macs) {
  toml::table options;
  options.insert("depth", depth);
  options.insert("num_classes", 1000);
  auto model = test::make_model("resnet", "org.torchhost.resnet", options);
  const ModelSize size = measure_size(model->state());
  CHECK(size.parameters == parameters);
  CHECK(size.trainable == parameters);
  model->set_training(false);
  const NamedTensors batch = example_batch(test::examples_of("resnet", "org.torchhost.resnet"), 1);
  REQUIRE(batch.front().first == "image");
  CHECK(batch.front().second.sizes() == at::IntArrayRef({1, 3, 224, 224}));
  const auto [flops, ops] = count_forward_flops(*model, batch);
  const double macs = static_cast<double>(flops) / 2.0;
  MESSAGE("ResNet-" << depth << ": " << macs / 1e9 << " GMACs (published " << published_macs / 1e9 << ")");
  CHECK(std::fabs(macs - published_macs) / published_macs < 0.01);
}

TEST_CASE("ResNet-18 at 224x224: 11,689,512 parameters, 1.814 GMACs") { check_resnet(18, 11'689'512, 1.814e9); }

TEST_CASE("ResNet-50 at 224x224: 25,557,032 parameters, 4.089 GMACs") { check_resnet(50, 25'557'032, 4.089e9); }

}  // namespace
