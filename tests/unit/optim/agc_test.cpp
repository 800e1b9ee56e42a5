// Adaptive gradient clipping on the host's side alone (timm's numbers: agc_timm_oracle.py): the
// unit-wise norms, which units are clipped and to what, the eps floor of a zero weight, and the
// parameters train.agc_ignore leaves out, with the error of a glob that matches nothing.
#include <ATen/ATen.h>

#include <cmath>

#include "tp/framework/optim/adaptive_clip.h"
#include "optimizer_test_util.h"

namespace {

at::Tensor with_grad(const at::Tensor& weight, const at::Tensor& grad) {
  at::Tensor p = weight.clone().requires_grad_();
  p.mutable_grad() = grad.clone();
  return p;
}

}  // namespace

TEST_CASE("agc: unit-wise norms are per output unit for >= 2 dims, whole for 1-D") {
  const at::Tensor conv = at::arange(24, at::kFloat).reshape({2, 3, 2, 2});
  const at::Tensor norms = tp::unitwise_norm(conv, 2.0);
  CHECK(norms.sizes() == at::IntArrayRef({2, 1, 1, 1}));
  CHECK(at::allclose(norms.flatten(), at::stack({conv[0].norm(), conv[1].norm()})));
  const at::Tensor bias = at::tensor({3.0f, 4.0f});
  CHECK(tp::unitwise_norm(bias, 2.0).dim() == 0);
  CHECK(tp::unitwise_norm(bias, 2.0).item<float>() == 5.0f);
}

TEST_CASE("agc: a unit above clip_factor x ||w|| is scaled to it, one below is left bit for bit") {
  // Row 0: ||w|| = 5, ||g|| = 10 > 0.5 x 5: scaled to norm 2.5. Row 1: ||w|| = 5, ||g|| = 1: kept.
  const at::Tensor w = at::tensor({3.0f, 4.0f, 4.0f, 3.0f}).reshape({2, 2});
  const at::Tensor g = at::tensor({6.0f, 8.0f, 0.6f, 0.8f}).reshape({2, 2});
  at::Tensor p = with_grad(w, g);
  tp::adaptive_clip_grad({p}, 0.5);
  CHECK(std::abs(p.grad()[0].norm().item<float>() - 2.5f) < 1e-6f);
  CHECK(at::allclose(p.grad()[0], g[0] * 0.25));
  CHECK(at::equal(p.grad()[1], g[1]));
  CHECK(at::equal(p.detach(), w));  // only the gradient changes
}

TEST_CASE("agc: a zero weight clips against eps x clip_factor; a zero gradient stays zero") {
  at::Tensor zero = with_grad(at::zeros({2, 3}), at::full({2, 3}, 1.0f));
  at::Tensor still = with_grad(at::ones({4}), at::zeros({4}));
  at::Tensor none = at::ones({3}).requires_grad_();  // no gradient: skipped
  tp::adaptive_clip_grad({zero, still, none}, 0.01);
  for (int64_t row = 0; row < 2; ++row) CHECK(std::abs(zero.grad()[row].norm().item<float>() - 1e-5f) < 1e-11f);
  CHECK(at::equal(still.grad(), at::zeros({4})));
  CHECK_FALSE(none.grad().defined());
}

TEST_CASE("agc: train.agc_ignore leaves its parameters out; a glob that matches nothing names its index") {
  uint64_t seed = 1;
  std::vector<at::Tensor> values;
  for (const auto& p : tp::test::model_spec()) values.push_back(tp::test::lcg_tensor(seed, p.shape, 1.0));
  std::vector<tp::StateTensor> state = tp::test::model_state(values);
  state.push_back({"bn.running_mean", at::zeros({6}), true});  // a buffer: never clipped
  const std::vector<at::Tensor> all = tp::agc_parameters(state, {});
  CHECK(all.size() == 5);
  const std::vector<at::Tensor> no_head = tp::agc_parameters(state, {"head.*"});
  REQUIRE(no_head.size() == 3);
  CHECK(no_head[2].is_same(state[2].tensor));
  try {
    tp::agc_parameters(state, {"head.*", "classifier.*"});
    FAIL("a glob matching nothing was accepted");
  } catch (const tp::ConfigError& e) {
    CHECK(e.key_path() == "train.agc_ignore[1]");
    CHECK(std::string(e.what()).find("'fc.weight'") != std::string::npos);
  }
}
