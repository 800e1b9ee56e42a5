// The host's side of agc_timm_oracle.py: adaptive gradient clipping (train.agc_clip_factor) on the
// gradients the oracle wrote, first the clip alone (tp::adaptive_clip_grad over every parameter,
// per norm type), then whole updates through ParameterUpdate::apply, the code a training step
// runs: SGD with momentum (the per-parameter loop), train.agc_ignore leaving the head out, in
// fp32 and in fp16, where the gradients arrive multiplied by the scaler's scale, are unscaled
// before the clip, and a step with an infinite gradient is skipped.
// Usage: agc_driver DIR. Reads DIR/spec.txt, DIR/param_<i>.bin, DIR/clip_grad_<i>.bin and
// DIR/grad_<t>_<i>.bin (raw float32); writes DIR/host_clip_<norm>_<i>.bin (the clipped gradients)
// and DIR/host_<label>_<i>.bin (the weights after the steps).
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/training/parameter_update.h"
#include "tp/framework/optim/adaptive_clip.h"
#include "raw_tensor_file.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/util/log.h"

namespace {

using tp::test::read_raw;
using tp::test::write_raw;

namespace fs = std::filesystem;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
};

struct Spec {
  std::vector<Param> params;
  double factor = 0;
  double lr = 0;
  int steps = 0;
  std::vector<std::string> ignore;
  std::vector<std::string> norms;                            ///< "2", "inf"
  std::vector<std::map<std::string, std::string>> variants;  ///< label, precision, skip_at
};

std::vector<tp::StateTensor> model_state(const fs::path& dir, const Spec& spec) {
  std::vector<tp::StateTensor> state;
  for (size_t i = 0; i < spec.params.size(); ++i)
    state.push_back({spec.params[i].name,
                     read_raw(dir / ("param_" + std::to_string(i) + ".bin"), spec.params[i].shape).requires_grad_(),
                     false});
  return state;
}

void clip_only(const fs::path& dir, const Spec& spec) {
  for (const std::string& norm : spec.norms) {
    std::vector<tp::StateTensor> state = model_state(dir, spec);
    std::vector<at::Tensor> params;
    for (size_t i = 0; i < state.size(); ++i) {
      state[i].tensor.mutable_grad() =
          read_raw(dir / ("clip_grad_" + std::to_string(i) + ".bin"), spec.params[i].shape);
      params.push_back(state[i].tensor);
    }
    const double norm_type = norm == "inf" ? std::numeric_limits<double>::infinity() : std::stod(norm);
    tp::adaptive_clip_grad(params, spec.factor, norm_type);
    for (size_t i = 0; i < state.size(); ++i)
      write_raw(dir / ("host_clip_" + norm + "_" + std::to_string(i) + ".bin"), state[i].tensor.grad());
  }
}

tp::OptimSection sgd_section(double lr) {
  tp::OptimSection o{};
  o.name = "sgd";
  o.lr = lr;
  o.weight_decay = 0.0;
  o.momentum = 0.9;
  o.betas = {0.9, 0.999};
  o.eps = 1e-8;
  o.implementation = "for_loop";  // torch.optim.SGD(foreach=False), the oracle's
  o.layer_decay = 1.0;
  return o;
}

void steps(const fs::path& dir, const Spec& spec, const std::map<std::string, std::string>& variant) {
  const bool fp16 = variant.at("precision") == "fp16";
  const int skip_at = std::stoi(variant.at("skip_at"));
  tp::RunConfig config{};
  config.train.agc_clip_factor = spec.factor;
  config.train.agc_ignore = spec.ignore;
  config.train.grad_norm_type = 2.0;
  config.amp.precision = fp16 ? tp::Precision::Fp16 : tp::Precision::Fp32;
  config.amp.init_scale = 1024.0;
  config.amp.growth_factor = 2.0;
  config.amp.backoff_factor = 0.5;
  config.amp.growth_interval = 2000;
  std::vector<tp::StateTensor> state = model_state(dir, spec);
  tp::BuiltOptimizer built = tp::make_optimizer(sgd_section(spec.lr), state);
  tp::Logger log;
  tp::ParameterUpdate update(config, built, state, c10::Device(c10::kCPU), log);
  update.select_agc_parameters();
  for (int t = 0; t < spec.steps; ++t) {
    // Backward through a scaled loss leaves scale x the true gradients (a power of 2: exact).
    const double scale = update.scaler().get_scale();
    (void)update.scaler().scale(at::ones({}));
    for (size_t i = 0; i < state.size(); ++i) {
      at::Tensor grad = read_raw(dir / ("grad_" + std::to_string(t) + "_" + std::to_string(i) + ".bin"),
                                 spec.params[i].shape);
      if (t == skip_at && i == 0) grad[0][0].fill_(std::numeric_limits<float>::infinity());
      state[i].tensor.mutable_grad() = fp16 ? grad * scale : grad;
    }
    update.stage();
    update.apply(at::Tensor(), /*measure_norm=*/false);
  }
  for (size_t i = 0; i < state.size(); ++i)
    write_raw(dir / ("host_" + variant.at("label") + "_" + std::to_string(i) + ".bin"), state[i].tensor);
}

Spec read_spec(const fs::path& file) {
  Spec spec;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "param") {
      Param p;
      size_t index = 0;
      words >> index >> p.name;
      for (int64_t d = 0; words >> d;) p.shape.push_back(d);
      spec.params.push_back(p);
    } else if (kind == "factor") {
      words >> spec.factor;
    } else if (kind == "lr") {
      words >> spec.lr;
    } else if (kind == "steps") {
      words >> spec.steps;
    } else if (kind == "ignore") {
      for (std::string glob; words >> glob;) spec.ignore.push_back(glob);
    } else if (kind == "norms") {
      for (std::string norm; words >> norm;) spec.norms.push_back(norm);
    } else if (kind == "variant") {
      std::map<std::string, std::string> v;
      for (std::string kv; words >> kv;) v[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
      spec.variants.push_back(v);
    }
  }
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: agc_driver DIR\n");
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    const Spec spec = read_spec(dir / "spec.txt");
    clip_only(dir, spec);
    for (const auto& variant : spec.variants) steps(dir, spec, variant);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agc_driver: %s\n", e.what());
    return 1;
  }
}
