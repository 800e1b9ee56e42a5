// A TorchScript module (scripted_oracle.py: convolutions with groups, stride and a transposed
// one, linear, matmul, bmm, einsum and functional ops) run through org.torchhost.torchscript:
// the counted FLOPs equal FlopCounterMode's on the same module in Python, per operator, and
// counting leaves the module's output and state unchanged.
#include "profile_test_util.h"

#include <c10/core/InferenceMode.h>

#include "tp/framework/profile/model_profile.h"

namespace {

using namespace tp;

TEST_CASE("a scripted model's FLOPs equal FlopCounterMode's, per operator") {
  const auto file = std::filesystem::temp_directory_path() / "torchhost-profile-scripted.pt";
  const std::string oracle = test::run_python("scripted_oracle.py", "'" + file.string() + "'");
  toml::table options;
  options.insert("path", file.string());
  auto model = test::make_model("torchscript", "org.torchhost.torchscript", options);
  model->set_training(false);
  const NamedTensors batch{{"image", at::rand({4, 3, 16, 16})}};
  std::vector<at::Tensor> before;
  for (const auto& s : model->state()) before.push_back(s.tensor.detach().clone());
  at::Tensor plain;
  {
    c10::InferenceMode inference;
    plain = model->forward(batch).front().second;
  }
  const auto [flops, ops] = count_forward_flops(*model, batch);
  CHECK(flops == test::json_int(oracle, "total"));
  for (const auto& op : ops) {
    INFO(op.op);
    CHECK(op.flops == test::json_int(oracle, "aten." + op.op.substr(6)));
  }
  {
    c10::InferenceMode inference;
    CHECK(at::equal(plain, model->forward(batch).front().second));
  }
  const auto after = model->state();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i) CHECK(at::equal(after[i].tensor, before[i]));
  std::filesystem::remove(file);
}

}  // namespace
