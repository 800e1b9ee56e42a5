// BatchNorm alone through the fused kernels (framework/src/ops, torchhost::bn_forward and
// bn_backward) by the SDK's tp::cpp::batch_norm, against the module path: forward, gradients and
// running statistics per dtype and shape, determinism, the cases that must stay unfused, a double
// backward refused, CUDA-graph capture, and ResNet-18/50's downsample branches taking it (each of
// their other BatchNorms its own fused op, counted). The bounds and their reasoning are
// gpu_fused_norm_test.cpp's (no ReLU here, so no mask); the step is fused_norm_support.h's.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/modules/batchnorm.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tp/cpp/fused_norm.h"
#include "tp/framework/config/validate.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_library.h"
#include "tp/framework/util/log.h"

#include "gpu/fused_norm_support.h"
#include "gpu/gpu_helpers.h"

#include <doctest/doctest.h>

using namespace tp::gpu_test::fused_norm;  // NOLINT(google-build-using-namespace): the shared step and bounds

TEST_CASE("fused BatchNorm alone: forward, gradients and running statistics match the module path per dtype") {
  require_ops();
  const std::vector<std::vector<int64_t>> shapes = {{2, 64, 5, 7}, {8, 256, 14, 14}, {32, 100, 9, 9}, {64, 64, 56, 56},
                                                    {4, 3, 17, 13}, {16, 2048, 7, 7}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const Bounds bound = bounds_for(dtype);
    for (const auto& shape : shapes) {
      const at::IntArrayRef dims(shape);
      CAPTURE(dtype);
      CAPTURE(dims);
      at::manual_seed(13);
      const torch::nn::BatchNorm2d bn = make_norm(shape[1]);
      const at::Tensor x = channels_last(shape, dtype, 2.0, 3.0);
      const at::Tensor dy = channels_last(shape, dtype, 1.0, 0.0);
      const Outcome fused = run_plain_norm(bn, x, dy, Path::kFused);
      CHECK(is_plain_norm_node(fused.grad_fn));
      const Outcome reference = run_plain_norm(bn, x, dy, Path::kModule);
      MESSAGE("y " << relative_l2(fused.y, reference.y) << ", dx " << relative_l2(fused.dx, reference.dx)
                   << ", dweight " << relative_l2(fused.d_weight, reference.d_weight) << ", dbias "
                   << relative_l2(fused.d_bias, reference.d_bias));
      CHECK(relative_l2(fused.y, reference.y) <= bound.y);
      CHECK(relative_l2(fused.dx, reference.dx) <= bound.grad);
      CHECK(relative_l2(fused.d_weight, reference.d_weight) <= bound.grad);
      CHECK(relative_l2(fused.d_bias, reference.d_bias) <= bound.grad);
      CHECK((fused.y < 0).any().item<bool>());  // no ReLU: negative outputs pass unclipped
      CHECK(max_abs_diff(fused.running_mean, reference.running_mean) <= 1e-5);
      CHECK(max_abs_diff(fused.running_var, reference.running_var) <=
            1e-5 * std::max(1.0, reference.running_var.abs().max().item<double>()));
      CHECK(at::equal(fused.batches, reference.batches));
      CHECK(fused.y.is_contiguous(at::MemoryFormat::ChannelsLast));
      CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
      CHECK((fused.y.scalar_type() == dtype));
      CHECK((fused.dx.scalar_type() == dtype));
    }
  }
}

TEST_CASE("fused BatchNorm alone: two runs give the same bits; a storage offset and an NCHW dy are read right") {
  require_ops();
  at::manual_seed(17);
  const torch::nn::BatchNorm2d bn = make_norm(256);
  const at::Tensor x = channels_last({32, 256, 28, 28}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor dy = channels_last({32, 256, 28, 28}, at::kBFloat16, 1.0, 0.0);
  CHECK(same_bits(run_plain_norm(bn, x, dy, Path::kFused), run_plain_norm(bn, x, dy, Path::kFused)));

  const at::Tensor storage = at::randn({1 + 2 * 5 * 7 * 64}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const at::Tensor shifted = storage.narrow(0, 1, int64_t{2} * 5 * 7 * 64).view({2, 5, 7, 64}).permute({0, 3, 1, 2});
  REQUIRE(shifted.is_contiguous(at::MemoryFormat::ChannelsLast));
  REQUIRE(reinterpret_cast<std::uintptr_t>(shifted.const_data_ptr()) % 16 != 0);
  const torch::nn::BatchNorm2d small = make_norm(64);
  const at::Tensor small_dy = at::randn({2, 64, 5, 7}, at::TensorOptions().device(at::kCUDA)).to(at::kHalf);
  const Outcome offset = run_plain_norm(small, shifted, small_dy, Path::kFused);
  const Outcome aligned =
      run_plain_norm(small, shifted.clone(), small_dy.contiguous(at::MemoryFormat::ChannelsLast), Path::kFused);
  CHECK(is_plain_norm_node(offset.grad_fn));
  CHECK(same_bits(offset, aligned));
}

TEST_CASE("batch_norm keeps the module path, bit for bit, in eval, on NCHW input, with allow_fused = false and momentum = None") {
  require_ops();
  at::manual_seed(19);
  const torch::nn::BatchNorm2d bn = make_norm(64);
  const at::Tensor x = channels_last({4, 64, 9, 9}, at::kFloat, 1.0, 0.5);
  check_module_path_kept(
      bn, x,
      [](torch::nn::BatchNorm2d& b, const at::Tensor& in, bool allow_fused) {
        return tp::cpp::batch_norm(b, in, allow_fused);
      },
      [](torch::nn::BatchNorm2d& b, const at::Tensor& in) { return b->forward(in); });
}

TEST_CASE("batch_norm's fused path refuses a double backward with a message") {
  require_ops();
  at::manual_seed(23);
  torch::nn::BatchNorm2d bn = make_norm(32);
  const at::Tensor x = channels_last({4, 32, 6, 6}, at::kFloat, 1.0, 0.5).requires_grad_();
  const at::Tensor y = tp::cpp::batch_norm(bn, x);
  REQUIRE(is_plain_norm_node(y.grad_fn()->name()));
  const at::Tensor loss = (y * y).sum();  // a non-constant dy, so a second derivative would not vanish
  try {
    torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
    FAIL("a double backward through batch_norm's fused path was not refused");
  } catch (const c10::Error& e) {
    CHECK(std::string(e.what()).find("tp::cpp::batch_norm's fused path is not twice differentiable") !=
          std::string::npos);
  }
  CHECK(torch::autograd::grad({loss}, {x})[0].defined());
}

TEST_CASE("fused BatchNorm alone is captured in a CUDA graph: one replay gives the eager step") {
  require_ops();
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  at::manual_seed(29);
  const torch::nn::BatchNorm2d bn = make_norm(128);
  const at::Tensor x = channels_last({16, 128, 14, 14}, at::kBFloat16, 2.0, 1.0);
  const at::Tensor dy = channels_last({16, 128, 14, 14}, at::kBFloat16, 1.0, 0.0);
  check_graph_replay_is_eager(
      bn, {x}, dy, [](torch::nn::BatchNorm2d& b, const std::vector<at::Tensor>& in) { return tp::cpp::batch_norm(b, in[0]); },
      is_plain_norm_node);
#endif
}

namespace {

struct NormTestHost {
  tp::Logger logger;
  tp::HostServices services{logger, tp::ProcessPlace{}};
};

/// org.torchhost.resnet of `depth` from the built resnet.so, in this process, on CUDA in training,
/// its 4-d state in channels-last memory as run.channels_last leaves it; seeded, so two calls with
/// the same depth build the same weights.
std::unique_ptr<tp::ModelProxy> cuda_resnet(int64_t depth, bool fused_norm) {
  static NormTestHost host;  // outlives the library
  static const std::shared_ptr<tp::PluginLibrary> library = tp::PluginLibrary::load(
      std::filesystem::path(tp::test::plugin_dir()) / "resnet.so", host.services);
  for (const tp::ComponentInfo& info : library->components()) {
    if (info.id != "org.torchhost.resnet") continue;
    toml::table options;
    options.insert("depth", depth);
    options.insert("num_classes", 10);
    options.insert("fused_norm", fused_norm);
    tp::ComponentConfig config{info.id, "model", std::move(options)};
    tp::validate_component(config, info.schema, "");
    at::manual_seed(31);
    auto model = std::make_unique<tp::ModelProxy>(tp::ComponentEntry{&info, library}, config);
    model->to_device(c10::Device(c10::kCUDA));
    for (const tp::StateTensor& s : model->state())
      if (s.tensor.dim() == 4) s.tensor.set_data(s.tensor.contiguous(at::MemoryFormat::ChannelsLast));
    model->set_training(true);
    return model;
  }
  FAIL("resnet.so has no org.torchhost.resnet");
  return nullptr;
}

/// How many autograd nodes behind `out` have each name, every node counted once.
std::map<std::string, int> node_names_behind(const at::Tensor& out) {
  std::map<std::string, int> names;
  std::set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> pending = {out.grad_fn().get()};
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    ++names[node->name()];
    for (const torch::autograd::Edge& edge : node->next_edges()) pending.push_back(edge.function.get());
  }
  return names;
}

int count_where(const std::map<std::string, int>& names, bool (*matches)(const std::string&)) {
  int n = 0;
  for (const auto& [name, count] : names)
    if (matches(name)) n += count;
  return n;
}

bool is_module_norm_node(const std::string& name) { return name.find("BatchNormBackward") != std::string::npos; }
bool is_fused_pool_node(const std::string& name) { return name.find("MaxPool3x3s2Function") != std::string::npos; }
bool is_module_pool_node(const std::string& name) { return name.find("MaxPool2DWithIndicesBackward") != std::string::npos; }

}  // namespace

TEST_CASE("ResNet-18 and ResNet-50 on CUDA, channels-last, training: every BatchNorm and the stem's pool take their fused op") {
  require_ops();
  // plugins/models/resnet/resnet_net.cpp. ResNet-18 (8 BasicBlocks): 3 downsample branches
  // (layer2-4: batch_norm); 8 bn2 + identity + ReLU (batch_norm_relu with a residual: bn_act_*); the
  // stem's bn1 and 8 blocks' bn1 + ReLU without a residual (bn_activation_*): 9. ResNet-50 (16
  // Bottlenecks): 4 downsample (layer1-4); 16 bn3 + identity; the stem and 16 blocks' bn1 and bn2:
  // 33. With fused_norm = false all 20 / 53 of them are the module's.
  struct Expected {
    int64_t depth;
    int downsample, residual_relu, relu;
  };
  for (const Expected e : {Expected{18, 3, 8, 9}, Expected{50, 4, 16, 33}}) {
    CAPTURE(e.depth);
    const at::Tensor image = at::randn({4, 3, 64, 64}, at::TensorOptions().device(at::kCUDA))
                                 .contiguous(at::MemoryFormat::ChannelsLast);
    std::map<std::string, at::Tensor> logits;
    for (const bool fused : {true, false}) {
      CAPTURE(fused);
      auto model = cuda_resnet(e.depth, fused);
      const tp::NamedTensors outputs = model->forward({{"image", image}});
      const auto found = std::find_if(outputs.begin(), outputs.end(), [](const auto& o) { return o.first == "logits"; });
      REQUIRE(found != outputs.end());
      const at::Tensor out = found->second;
      const auto names = node_names_behind(out);
      CHECK(count_where(names, is_plain_norm_node) == (fused ? e.downsample : 0));
      CHECK(count_where(names, is_relu_norm_node) == (fused ? e.residual_relu : 0));
      CHECK(count_where(names, is_activation_norm_node) == (fused ? e.relu : 0));
      CHECK(count_where(names, is_module_norm_node) == (fused ? 0 : e.downsample + e.residual_relu + e.relu));
      // The stem's max pool: tp::cpp::max_pool_3x3_s2's fused node (gpu_fused_pool_test.cpp) or at::max_pool2d's.
      CHECK(count_where(names, is_fused_pool_node) == (fused ? 1 : 0));
      CHECK(count_where(names, is_module_pool_node) == (fused ? 0 : 1));
      out.to(at::kFloat).square().sum().backward();
      for (const tp::StateTensor& s : model->state()) {
        if (s.name == "layer2.0.downsample.1.num_batches_tracked") CHECK(s.tensor.item<int64_t>() == 1);
        if (s.name == "layer2.0.downsample.1.weight") {
          REQUIRE(s.tensor.grad().defined());
          CHECK(s.tensor.grad().isfinite().all().item<bool>());
        }
      }
      logits[fused ? "fused" : "module"] = out.detach();
    }
    // Same weights, same input: the paths differ by BatchNorm's rounding, carried through the net
    // (TF32 convolutions on both sides).
    const double diff = relative_l2(logits["fused"], logits["module"]);
    MESSAGE("ResNet-" << e.depth << " logits, fused against module path: " << diff);
    CHECK(diff <= 5e-3);
  }
}
