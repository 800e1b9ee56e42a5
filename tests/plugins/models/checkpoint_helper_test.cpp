// tp/cpp/activation_checkpoint.h on its own (no plugin): gradients with checkpointing equal gradients
// without, for several inputs and outputs, dropout, parameters, BatchNorm and autocast; the block
// runs again in backward only when it should; misuse fails clearly.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/dropout.h>

#include "tp/cpp/activation_checkpoint.h"
#include "support/autograd_graph.h"

#include <string>
#include <tuple>
#include <vector>

#include "support/doctest_after_torch.h"

namespace {

using tp::cpp::CheckpointBlock;
using tp::cpp::checkpointed;
using tp::test::has_checkpoint_node;

/// Two inputs, two parameters, dropout: returns (a, b) where both depend on both inputs.
struct TwoInputBlock : torch::nn::Module {
  torch::nn::Linear fa{nullptr}, fb{nullptr};
  int calls = 0;
  TwoInputBlock() {
    fa = register_module("fa", torch::nn::Linear(8, 8));
    fb = register_module("fb", torch::nn::Linear(8, 8));
  }
  std::tuple<at::Tensor, at::Tensor> run(const at::Tensor& x, const at::Tensor& y) {
    ++calls;
    namespace F = torch::nn::functional;
    at::Tensor h = F::dropout(fa->forward(x) * y.sigmoid(), F::DropoutFuncOptions().p(0.5).training(is_training()));
    return {h.tanh(), fb->forward(h + y)};
  }
};

struct StepResult {
  std::vector<at::Tensor> grads;  // x, y, then each parameter
  std::vector<at::Tensor> outputs;
  at::Tensor next_random;  // one draw from the global generator after backward
};

StepResult two_input_step(bool checkpoint) {
  at::manual_seed(7);
  auto block = std::make_shared<TwoInputBlock>();
  at::Tensor x = at::randn({5, 8}).requires_grad_();
  at::Tensor y = at::randn({5, 8}).requires_grad_();
  at::manual_seed(11);  // the dropout masks
  auto fn = [b = block.get()](const at::Tensor& xi, const at::Tensor& yi) { return b->run(xi, yi); };
  auto [a, c] = checkpoint ? checkpointed(*block, fn, x, y) : fn(x, y);
  CHECK(has_checkpoint_node(a) == checkpoint);
  ((a * a).sum() + (c * 3).sum()).backward();
  CHECK(block->calls == (checkpoint ? 2 : 1));  // forward, and the recompute in backward
  StepResult r;
  r.grads = {x.grad(), y.grad()};
  for (const auto& p : block->parameters()) r.grads.push_back(p.grad());
  r.outputs = {a.detach(), c.detach()};
  r.next_random = at::rand({4});
  return r;
}

void check_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double tol = 0.0) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].defined());
    REQUIRE(b[i].defined());
    const double diff = (a[i] - b[i]).abs().max().item<double>();
    CHECK(diff <= tol);
  }
}

TEST_CASE("two inputs, two outputs, dropout and parameters: gradients equal those without checkpointing") {
  const StepResult plain = two_input_step(false);
  const StepResult ckpt = two_input_step(true);
  check_equal(ckpt.outputs, plain.outputs);
  check_equal(ckpt.grads, plain.grads, 1e-6);  // the dropout mask was drawn again identically
  // The recompute rewinds the generator and then puts it back: the run's random stream is the
  // one it would have been without checkpointing.
  check_equal({ckpt.next_random}, {plain.next_random});
}

TEST_CASE("parameters get gradients when no input requires grad (the first block of a network)") {
  at::manual_seed(3);
  torch::nn::Linear lin(4, 3);
  const at::Tensor image = at::randn({2, 4});  // a batch: no gradient
  at::Tensor out = checkpointed(*lin, [l = lin.ptr()](const at::Tensor& x) { return l->forward(x).relu(); }, image);
  REQUIRE(out.requires_grad());
  out.sum().backward();
  const at::Tensor with = lin->weight.grad().clone();
  lin->weight.mutable_grad().reset();
  lin->forward(image).relu().sum().backward();
  check_equal({with}, {lin->weight.grad()}, 1e-6);
}

TEST_CASE("torch::autograd::grad reaches parameters inside the block, without touching .grad") {
  at::manual_seed(4);
  torch::nn::Linear lin(4, 4);
  at::Tensor x = at::randn({3, 4}).requires_grad_();
  at::Tensor out = checkpointed(*lin, [l = lin.ptr()](const at::Tensor& in) { return l->forward(in).sin(); }, x);
  auto g = torch::autograd::grad({out.sum()}, {lin->weight, x});
  CHECK_FALSE(lin->weight.grad().defined());
  auto expect = torch::autograd::grad({lin->forward(x).sin().sum()}, {lin->weight, x});
  check_equal({g[0], g[1]}, {expect[0], expect[1]}, 1e-6);
}

TEST_CASE("a vector result with an unused output and an integer output") {
  at::manual_seed(5);
  at::Tensor w = at::randn({6}).requires_grad_();
  at::Tensor x = at::randn({6}).requires_grad_();
  auto fn = [w](const at::Tensor& in) {
    return std::vector<at::Tensor>{in * w, (in + w).exp(), in.argmax()};
  };
  auto outs = checkpointed(CheckpointBlock().add_parameter(w), fn, x);
  REQUIRE(outs.size() == 3);
  CHECK_FALSE(outs[2].requires_grad());  // integer: no gradient
  CHECK(outs[2].item<int64_t>() == x.argmax().item<int64_t>());
  outs[0].sum().backward();  // outs[1] unused: its gradient is undefined, not zeros
  check_equal({x.grad(), w.grad()}, {w.detach(), x.detach()}, 1e-6);
}

TEST_CASE("a plain call when grad mode is off or the block is in eval mode") {
  torch::nn::Linear lin(4, 4);
  const at::Tensor x = at::randn({2, 4}).requires_grad_();
  int calls = 0;
  auto fn = [l = lin.ptr(), &calls](const at::Tensor& in) {  // test only: `calls` outlives backward
    ++calls;
    return l->forward(in);
  };
  {
    at::NoGradGuard no_grad;
    const at::Tensor out = checkpointed(*lin, fn, x);
    CHECK_FALSE(out.requires_grad());
  }
  lin->eval();
  at::Tensor out = checkpointed(*lin, fn, x);
  CHECK(out.requires_grad());
  CHECK_FALSE(has_checkpoint_node(out));  // ordinary autograd history
  out.sum().backward();
  CHECK(calls == 2);  // no recompute
  lin->train();
  out = checkpointed(*lin, fn, x);
  CHECK(has_checkpoint_node(out));
  out.sum().backward();
  CHECK(calls == 4);
}

/// conv-BN-ReLU twice, as a model would declare it.
struct ConvNet : torch::nn::Module, tp::cpp::Checkpointable {
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d b1{nullptr}, b2{nullptr};
  ConvNet() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 6, 3).padding(1)));
    b1 = register_module("b1", torch::nn::BatchNorm2d(6));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 6, 3).padding(1)));
    b2 = register_module("b2", torch::nn::BatchNorm2d(6));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = checkpoint_block({*c1, *b1}, [this](const at::Tensor& in) { return b1->forward(c1->forward(in)).relu(); }, x);
    return checkpoint_block({*c2, *b2}, [this](const at::Tensor& in) { return b2->forward(c2->forward(in)).relu_(); }, h);
  }
};

TEST_CASE("BatchNorm running statistics are updated once per step, not again by the recompute") {
  auto run = [](bool on) {
    at::manual_seed(9);
    ConvNet net;
    net.set_activation_checkpointing(on);
    const at::Tensor x = at::randn({4, 3, 8, 8});
    at::Tensor out = net.forward(x);
    CHECK(has_checkpoint_node(out) == on);
    out.pow(2).mean().backward();
    std::vector<at::Tensor> all;
    for (const auto& p : net.parameters()) all.push_back(p.grad());
    for (const auto& b : net.buffers()) all.push_back(b.to(at::kDouble));
    return all;
  };
  check_equal(run(true), run(false), 1e-6);  // grads, running_mean/var, num_batches_tracked
}

TEST_CASE("autocast: the recompute runs in the forward's autocast state although backward is outside it") {
  auto run = [](bool on) {
    at::manual_seed(10);
    ConvNet net;
    net.set_activation_checkpointing(on);
    const at::Tensor x = at::randn({2, 3, 8, 8});
    at::Tensor out;
    {
      at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
      at::autocast::set_autocast_enabled(at::kCPU, true);
      out = net.forward(x);
      at::autocast::set_autocast_enabled(at::kCPU, false);
      at::autocast::clear_cache();
    }
    out.to(at::kFloat).sum().backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : net.parameters()) grads.push_back(p.grad());
    return grads;
  };
  // A recompute in float32 would give gradients that differ by bf16 rounding (~1e-2 relative).
  check_equal(run(true), run(false), 1e-6);
  CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

TEST_CASE("a block that modifies its input in place after the forward fails in backward") {
  torch::nn::Linear lin(3, 3);
  at::Tensor x = at::randn({2, 3}).requires_grad_() * 1;  // non-leaf, so in-place is allowed
  at::Tensor out = checkpointed(*lin, [l = lin.ptr()](const at::Tensor& in) { return l->forward(in); }, x);
  x.mul_(2);  // the saved input changes under the block
  CHECK_THROWS_WITH_AS(out.sum().backward(), doctest::Contains("modified by an inplace operation"), c10::Error);
}

struct Refuses : tp::cpp::Checkpointable {
  void set_activation_checkpointing(bool enabled) override {
    if (enabled) throw tp::cpp::Failure(TP_ERR_UNSUPPORTED, "nothing to checkpoint");
    Checkpointable::set_activation_checkpointing(enabled);
  }
};
tp::cpp::Checkpointable g_plain;
Refuses g_refuses;
tp::cpp::Checkpointable& as_plain(void*) { return g_plain; }
Refuses& as_refuses(void*) { return g_refuses; }

TEST_CASE("set_activation_checkpointing_entry maps the switch and errors onto the C entry") {
  int dummy = 0;
  CHECK(tp::cpp::set_activation_checkpointing_entry<&as_plain>(&dummy, true) == TP_OK);
  CHECK(g_plain.activation_checkpointing());
  CHECK(tp::cpp::set_activation_checkpointing_entry<&as_plain>(&dummy, false) == TP_OK);
  CHECK_FALSE(g_plain.activation_checkpointing());
  CHECK(tp::cpp::set_activation_checkpointing_entry<&as_refuses>(&dummy, true) == TP_ERR_UNSUPPORTED);
  CHECK_FALSE(g_refuses.activation_checkpointing());
  CHECK(tp::cpp::set_activation_checkpointing_entry<&as_plain>(nullptr, true) == TP_ERR_INVALID_ARGUMENT);
}

}  // namespace
