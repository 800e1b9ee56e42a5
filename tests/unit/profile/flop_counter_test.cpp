// FlopCounter against Python's torch.utils.flop_counter.FlopCounterMode (flop_oracle.py) on the
// same ATen ops: linear (2-D and 3-D, with and without bias), matmul, mm, addmm, bmm, baddbmm,
// einsum, conv1d/2d/3d with stride, padding, dilation and groups, transposed convolutions. Totals
// and per-operator counts must be equal, which also shows each op is counted once (conv2d ->
// convolution -> _convolution -> mkldnn_convolution appears only as aten::convolution).
#include "profile_test_util.h"

#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>

#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/error.h"
#include "tp/framework/profile/flop_counter.h"

namespace {

using namespace tp;

/// Keep in step with ops() in flop_oracle.py.
void run_ops() {
  auto r = [](at::IntArrayRef shape) { return at::rand(shape); };
  const at::Tensor w = r({30, 20});
  at::linear(r({8, 20}), w, r({30}));
  at::linear(r({4, 6, 20}), w, r({30}));
  at::linear(r({4, 6, 20}), w);
  at::matmul(r({2, 5, 7}), r({2, 7, 3}));
  at::matmul(r({3, 5, 7}), r({7, 2}));
  at::mm(r({5, 7}), r({7, 4}));
  at::addmm(r({5, 4}), r({5, 7}), r({7, 4}));
  at::bmm(r({2, 5, 7}), r({2, 7, 3}));
  at::baddbmm(r({2, 5, 3}), r({2, 5, 7}), r({2, 7, 3}));
  at::einsum("bij,bjk->bik", {r({2, 3, 4}), r({2, 4, 5})});
  at::conv2d(r({2, 4, 9, 9}), r({6, 2, 3, 3}), r({6}), /*stride=*/2, /*padding=*/1, /*dilation=*/1, /*groups=*/2);
  at::conv2d(r({2, 4, 9, 9}), r({5, 4, 3, 3}), {}, /*stride=*/1, /*padding=*/2, /*dilation=*/2);
  at::conv1d(r({2, 3, 10}), r({5, 3, 3}));
  at::conv3d(r({1, 2, 5, 6, 7}), r({3, 2, 2, 3, 3}), {}, /*stride=*/at::IntArrayRef{1, 2, 1});
  at::conv_transpose2d(r({2, 4, 5, 5}), r({4, 3, 3, 3}), r({3}), /*stride=*/2, /*padding=*/1, /*output_padding=*/1);
  at::conv_transpose2d(r({2, 4, 5, 5}), r({4, 3, 3, 3}), {}, /*stride=*/2, /*padding=*/0, /*output_padding=*/0,
                       /*groups=*/2);
  at::relu(r({10})).sum();
}

int64_t flops_of(const std::vector<OpFlops>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.op == name) return op.flops;
  return 0;
}

TEST_CASE("FLOPs of functional ops equal FlopCounterMode's, per operator, each op counted once") {
  const std::string oracle = test::run_python("flop_oracle.py", "ops");
  c10::InferenceMode inference;
  FlopCounter counter;
  run_ops();
  const auto ops = counter.by_operator();
  CHECK(counter.total_flops() == test::json_int(oracle, "total"));
  for (const char* op : {"addmm", "mm", "bmm", "baddbmm", "convolution"})
    CHECK_MESSAGE(flops_of(ops, std::string("aten::") + op) == test::json_int(oracle, std::string("aten.") + op), op);
  for (const auto& op : ops) {
    INFO(op.op);
    CHECK(op.op != "aten::_convolution");
    CHECK(op.op != "aten::mkldnn_convolution");
    CHECK(op.op != "aten::_slow_conv2d_forward");
  }
}

TEST_CASE("grad mode and bf16 autocast do not change the count (autocast re-dispatch is counted once)") {
  int64_t expected = 0;
  {
    FlopCounter plain;
    at::linear(at::rand({8, 20}), at::rand({30, 20}), at::rand({30}));
    expected = plain.total_flops();
  }
  CHECK(expected == 2 * 8 * 20 * 30);
  FlopCounter counter;
  {
    AutocastGuard autocast(c10::DeviceType::CPU, Precision::Bf16);
    const at::Tensor y = at::linear(at::rand({8, 20}, at::requires_grad()), at::rand({30, 20}), at::rand({30}));
    CHECK((y.scalar_type() == at::kBFloat16));
  }
  CHECK(counter.total_flops() == expected);
}

TEST_CASE("scaled dot-product attention counts FlopCounterMode's sdpa formula, once") {
  const std::string oracle = test::run_python("flop_oracle.py", "sdpa_formula");
  FlopCounter counter;
  at::scaled_dot_product_attention(at::rand({2, 4, 16, 8}), at::rand({2, 4, 16, 8}), at::rand({2, 4, 16, 6}));
  CHECK(counter.total_flops() == test::json_int(oracle, "total"));
  const auto ops = counter.by_operator();
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].op == "aten::scaled_dot_product_attention");
  CHECK(ops[0].calls == 1);
}

TEST_CASE("one counter per thread; ops after it ends are not counted") {
  {
    FlopCounter counter;
    CHECK_THROWS_AS(FlopCounter(), tp::Error);
  }
  FlopCounter next;
  CHECK(next.total_flops() == 0);
  at::mm(at::rand({2, 3}), at::rand({3, 4}));
  CHECK(next.total_flops() == 48);
}

}  // namespace
