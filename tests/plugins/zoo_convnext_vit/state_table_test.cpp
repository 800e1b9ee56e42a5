// convnext.so and vit.so through their C ABI against torchvision's state_dict of every variant
// (the committed torchvision_state.txt, so no Python is needed): the same names in the same
// order, the same shapes, parameters only, and the same parameter counts, so torchvision weights
// load through train.init_weights unchanged. Creating ViT-L/16 allocates its 304M parameters
// (1.2 GB) for a moment; each model is freed before the next.
#include "zoo_convnext_vit.h"

namespace {

using namespace tp::test;
using namespace tp::test::zoo;

TEST_CASE("convnext and vit: state names, order, shapes and parameter counts are torchvision's, every variant") {
  const auto table = read_table();
  REQUIRE(table.size() == 6);
  for (const auto& [key, expected] : table) {
    CAPTURE(key);
    std::istringstream words(key);
    std::string family, variant;
    words >> family >> variant;
    const bool convnext = family == "convnext";
    ZooModel m(convnext ? kConvNeXt : kViT, convnext ? kConvNeXtId : kViTId,
               convnext ? convnext_config(variant) : vit_config(variant));
    std::vector<std::string> ours;
    for (const auto& e : m.state())
      ours.push_back(std::string(e.is_buffer ? "b " : "p ") + e.name + " " + shape_key(tensor_of(e.handle).sizes()));
    CHECK(ours.size() == expected.state.size());
    size_t different = 0;
    for (size_t i = 0; i < std::min(ours.size(), expected.state.size()); ++i) {
      if (ours[i] == expected.state[i]) continue;
      if (++different <= 5) CHECK_MESSAGE(ours[i] == expected.state[i], "entry " << i);
    }
    CHECK(different == 0);
    CHECK(m.parameter_count() == expected.parameter_count);
  }
}

TEST_CASE("convnext and vit: the published parameter counts") {
  // torchvision's weight metadata ("num_params"): ConvNeXt-Tiny and ViT-B/16 at 1000 classes.
  {
    ZooModel m(kConvNeXt, kConvNeXtId, convnext_config("tiny"));
    CHECK(m.parameter_count() == 28'589'128);
  }
  ZooModel m(kViT, kViTId, vit_config("b_16"));
  CHECK(m.parameter_count() == 86'567'656);
}

TEST_CASE("convnext and vit: num_classes, in_channels and image_size shape only their tensors") {
  {
    ZooModel m(kConvNeXt, kConvNeXtId, convnext_config("tiny", 7, -1.0, 1));
    CHECK(m.named("features.0.0.weight").sizes() == at::IntArrayRef({96, 1, 4, 4}));
    CHECK(m.named("classifier.2.weight").sizes() == at::IntArrayRef({7, 768}));
    CHECK(m.named("classifier.2.bias").sizes() == at::IntArrayRef({7}));
  }
  // (image_size / patch)^2 + 1 positions: 64/16 -> 17, 224/32 -> 50.
  {
    ZooModel m(kViT, kViTId, vit_config("b_16", 64, 10));
    CHECK(m.named("encoder.pos_embedding").sizes() == at::IntArrayRef({1, 17, 768}));
    CHECK(m.named("heads.head.weight").sizes() == at::IntArrayRef({10, 768}));
  }
  ZooModel m(kViT, kViTId, vit_config("b_32"));
  CHECK(m.named("encoder.pos_embedding").sizes() == at::IntArrayRef({1, 50, 768}));
}

}  // namespace
