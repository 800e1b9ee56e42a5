// Oracle: every optimizer and implementation of make_optimizer against torch.optim in Python
// (optimizer_oracle.py, run with tp::test::python()). Both sides start from the same parameters and
// apply the same gradients for kOptimizerOracleSteps steps; raw float32 files carry them across. Each variant
// has [[optim.param_groups]] rules (an lr override, a weight_decay override on a 1-D tensor),
// which Python resolves on its own with fnmatch, and between steps both sides change every
// group's lr and (when cycled) SGD momentum or Adam beta1, as OneCycle does, so the optimizers
// must read their options at step time. Compared: the groups (names, lr, weight decay) and the
// final parameters, within 1e-6 relative.
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "optimizer_test_util.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "support/test_paths.h"

namespace {

constexpr int kOptimizerOracleSteps = 8;

struct Variant {
  std::string label;
  tp::OptimSection options;
  bool cycle = false;  // change momentum / beta1 between steps
};

tp::OptimSection with(tp::OptimSection o, double lr, double weight_decay) {
  o.lr = lr;
  o.weight_decay = weight_decay;
  o.param_groups = {{"head.*", 2 * lr, std::nullopt}, {"norm.*", std::nullopt, 0.05}};
  return o;
}

std::vector<Variant> variants() {
  using tp::test::optim_section;
  std::vector<Variant> out;
  for (const std::string impl : {"for_loop", "fused"}) {
    auto sgd = with(optim_section("sgd", impl), 0.05, 0.01);
    out.push_back({"sgd_momentum_" + impl, sgd, true});
    auto nesterov = sgd;
    nesterov.nesterov = true;
    out.push_back({"sgd_nesterov_" + impl, nesterov, true});
    auto plain = sgd;
    plain.momentum = 0;
    out.push_back({"sgd_plain_" + impl, plain, false});
    for (const std::string name : {"adam", "adamw"}) {
      auto adam = with(optim_section(name, impl), 0.01, 0.1);
      out.push_back({name + "_" + impl, adam, true});
      adam.amsgrad = true;
      out.push_back({name + "_amsgrad_" + impl, adam, true});
    }
  }
  auto rmsprop = with(optim_section("rmsprop", "for_loop"), 0.01, 0.01);
  rmsprop.momentum = 0;
  out.push_back({"rmsprop", rmsprop, false});
  rmsprop.centered = true;
  out.push_back({"rmsprop_centered", rmsprop, false});
  rmsprop.momentum = 0.9;
  out.push_back({"rmsprop_centered_momentum", rmsprop, false});
  rmsprop.centered = false;
  out.push_back({"rmsprop_momentum", rmsprop, false});
  return out;
}

std::string number(double v, int digits = 17) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

void write_spec(const std::filesystem::path& dir, const std::vector<Variant>& vs) {
  std::ofstream spec(dir / "spec.txt");
  spec << "steps " << kOptimizerOracleSteps << "\n";
  for (size_t i = 0; i < tp::test::model_spec().size(); ++i) {
    spec << "param " << i << " " << tp::test::model_spec()[i].name;
    for (int64_t d : tp::test::model_spec()[i].shape) spec << " " << d;
    spec << "\n";
  }
  for (const Variant& v : vs) {
    const tp::OptimSection& o = v.options;
    spec << "variant " << v.label << " name=" << o.name << " impl=" << o.implementation << " lr=" << number(o.lr)
         << " weight_decay=" << number(o.weight_decay) << " momentum=" << number(o.momentum)
         << " nesterov=" << o.nesterov << " beta1=" << number(o.betas[0]) << " beta2=" << number(o.betas[1])
         << " eps=" << number(o.eps) << " amsgrad=" << o.amsgrad << " alpha=" << number(o.alpha)
         << " centered=" << o.centered << " cycle=" << v.cycle << "\n";
    for (const tp::ParamGroupRule& r : o.param_groups) {
      if (r.lr) spec << "rule " << v.label << " " << r.pattern << " lr " << number(*r.lr) << "\n";
      if (r.weight_decay) spec << "rule " << v.label << " " << r.pattern << " weight_decay " << number(*r.weight_decay) << "\n";
    }
  }
}

// The momentum (SGD) or beta1 (Adam, AdamW) of step t when cycled; the Python side mirrors it.
void set_step_options(torch::optim::Optimizer& opt, const std::vector<double>& base_lrs, const Variant& v, int t) {
  for (size_t g = 0; g < base_lrs.size(); ++g) {
    auto& options = opt.param_groups()[g].options();
    options.set_lr(base_lrs[g] * (1 + 0.1 * t));
    if (!v.cycle) continue;
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) sgd->momentum(v.options.momentum - 0.01 * t);
    if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&options))
      adam->betas({v.options.betas[0] - 0.01 * t, v.options.betas[1]});
    if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&options))
      adamw->betas({v.options.betas[0] - 0.01 * t, v.options.betas[1]});
  }
}

double options_weight_decay(const torch::optim::OptimizerOptions& options) {
  if (auto* o = dynamic_cast<const torch::optim::SGDOptions*>(&options)) return o->weight_decay();
  if (auto* o = dynamic_cast<const torch::optim::AdamOptions*>(&options)) return o->weight_decay();
  if (auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(&options)) return o->weight_decay();
  if (auto* o = dynamic_cast<const torch::optim::RMSpropOptions*>(&options)) return o->weight_decay();
  return -1;
}

}  // namespace

TEST_CASE("every optimizer and implementation matches torch.optim, param groups included") {
  const auto dir = tp::test::exchange_dir("optimizer_oracle");
  uint64_t seed = 20250101;
  std::vector<at::Tensor> init;
  for (const auto& p : tp::test::model_spec()) init.push_back(tp::test::lcg_tensor(seed, p.shape, 0.5));
  std::vector<std::vector<at::Tensor>> grads(kOptimizerOracleSteps);
  for (int t = 0; t < kOptimizerOracleSteps; ++t)
    for (const auto& p : tp::test::model_spec()) grads[t].push_back(tp::test::lcg_tensor(seed, p.shape, 1.0));
  for (size_t i = 0; i < init.size(); ++i) tp::test::write_raw(dir / ("param_" + std::to_string(i) + ".bin"), init[i]);
  for (int t = 0; t < kOptimizerOracleSteps; ++t)
    for (size_t i = 0; i < init.size(); ++i)
      tp::test::write_raw(dir / ("grad_" + std::to_string(t) + "_" + std::to_string(i) + ".bin"), grads[t][i]);
  const std::vector<Variant> vs = variants();
  write_spec(dir, vs);
  const std::string output = tp::test::run_python("tests/unit/optim/optimizer_oracle.py", "'" + dir.string() + "'");

  double worst = 0;
  std::string per_variant;
  for (const Variant& v : vs) {
    double variant_worst = 0;
    INFO("variant ", v.label);
    const std::vector<tp::StateTensor> state = tp::test::model_state(init);
    tp::BuiltOptimizer built = tp::make_optimizer(v.options, state);
    CHECK(built.fused == (v.options.implementation == "fused"));
    // Groups as Python resolved them: "lr weight_decay name..." per group, in order.
    std::ifstream groups_file(dir / ("groups_" + v.label + ".txt"));
    std::vector<double> base_lrs;
    size_t g = 0;
    for (std::string line; std::getline(groups_file, line); ++g) {
      std::istringstream in(line);
      double lr = 0, wd = 0;
      in >> lr >> wd;
      std::vector<std::string> names;
      for (std::string n; in >> n;) names.push_back(n);
      REQUIRE(g < built.group_names.size());
      CHECK(built.group_names[g] == names);
      const auto& options = built.optimizer->param_groups()[g].options();
      CHECK(options.get_lr() == lr);
      CHECK(options_weight_decay(options) == wd);
      base_lrs.push_back(options.get_lr());
    }
    CHECK(g == built.group_names.size());

    for (int t = 0; t < kOptimizerOracleSteps; ++t) {
      set_step_options(*built.optimizer, base_lrs, v, t);
      for (size_t i = 0; i < state.size(); ++i) state[i].tensor.mutable_grad() = grads[t][i].clone();
      built.optimizer->step();
    }
    for (size_t i = 0; i < state.size(); ++i) {
      const at::Tensor expected = tp::test::read_raw(dir / ("out_" + v.label + "_" + std::to_string(i) + ".bin"),
                                                     tp::test::model_spec()[i].shape);
      const double diff = tp::test::relative_difference(state[i].tensor.detach(), expected);
      INFO(state[i].name, ": relative difference ", diff);
      CHECK(diff <= 1e-6);
      // The parameters moved: the comparison is not between untouched tensors.
      CHECK(tp::test::relative_difference(init[i], expected) > 1e-3);
      variant_worst = std::max(variant_worst, diff);
    }
    worst = std::max(worst, variant_worst);
    per_variant += " " + v.label + "=" + number(variant_worst, 2);
  }
  MESSAGE("optimizer oracle: largest relative parameter difference " << worst << " over " << vs.size()
                                                                     << " variants;" << per_variant);
}
