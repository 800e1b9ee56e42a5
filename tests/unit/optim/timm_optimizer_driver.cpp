// The host's side of lamb_timm_oracle.py, lion_timm_oracle.py and lars_timm_oracle.py:
// make_optimizer with optim.name = "lamb", "lion" or "lars" over the parameters and gradients the
// oracle wrote, as optimizer_oracle_test.cpp does for torch.optim.
// Per variant: the groups the factory resolved (default rule and [[optim.param_groups]] rules),
// `steps` updates with every group's lr changed before each (and, when cycled, beta1 through the
// AdamWOptions or LARS's momentum through the SGDOptions that OneCycle casts to), and after
// `resume_at` updates a round trip of the state: save(), a new optimizer over fresh tensors
// holding the weights, load(), then the rest.
// Usage: timm_optimizer_driver lamb|lion|lars DIR. Reads DIR/spec.txt, DIR/param_<i>.bin, DIR/grad_<t>_<i>.bin (raw
// float32); writes DIR/host_groups_<label>.txt ("lr weight_decay name..." per group, lr and weight
// decay as %.17g) and DIR/host_<label>_<i>.bin.
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "raw_tensor_file.h"
#include "tp/framework/optim/optimizer_factory.h"

namespace {

using tp::test::read_raw;
using tp::test::write_raw;

namespace fs = std::filesystem;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
};

struct Variant {
  std::string label;
  std::map<std::string, std::string> keys;
  std::vector<tp::ParamGroupRule> rules;
};

std::vector<tp::StateTensor> model_state(const std::vector<Param>& params, const std::vector<at::Tensor>& values) {
  std::vector<tp::StateTensor> state;
  for (size_t i = 0; i < params.size(); ++i)
    state.push_back({params[i].name, values[i].clone().requires_grad_(), false});
  return state;
}

/// The variant's [optim] table for `name`: LAMB's own keys from the variant for "lamb", LARS's for
/// "lars" (the schema's defaults otherwise), Lion's caution for "lion".
tp::OptimSection section(const Variant& v, const std::string& name) {
  const bool lamb = name == "lamb";
  const bool lars = name == "lars";
  const auto number = [&](const char* key, double otherwise) {
    return v.keys.contains(key) && (lamb || lars) ? std::stod(v.keys.at(key)) : otherwise;
  };
  const auto flag = [&](const char* key, bool otherwise) {
    return v.keys.contains(key) && (lamb || lars) ? v.keys.at(key) == "1" : otherwise;
  };
  tp::OptimSection o;
  o.name = name;
  o.lr = std::stod(v.keys.at("lr"));
  o.lr_base = 0.0;
  o.lr_base_size = 256;
  o.lr_base_scale = "auto";
  o.weight_decay = std::stod(v.keys.at("weight_decay"));
  o.momentum = number("momentum", 0.9);
  o.dampening = number("dampening", 0.0);
  o.nesterov = flag("nesterov", false);
  o.betas = lars ? std::vector<double>{0.9, 0.999} : std::vector<double>{std::stod(v.keys.at("beta1")),
                                                                         std::stod(v.keys.at("beta2"))};
  o.eps = number("eps", 1e-8);
  o.amsgrad = false;
  o.alpha = 0.99;
  o.centered = false;
  o.bias_correction = flag("bias_correction", true);
  o.grad_averaging = flag("grad_averaging", true);
  o.lamb_max_grad_norm = number("lamb_max_grad_norm", 1.0);
  o.trust_clip = flag("trust_clip", false);
  o.always_adapt = flag("always_adapt", false);
  o.trust_coeff = number("trust_coeff", 0.001);
  o.caution = name == "lion" && v.keys.at("caution") == "1";
  o.implementation = "auto";
  o.layer_decay = 1.0;
  o.param_groups = v.rules;
  return o;
}

std::string archive_of(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

void load_archive(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  optimizer.load(archive);
}

/// A group's weight decay: LARS's options are SGD's, the others' AdamW's.
double weight_decay_of(const torch::optim::OptimizerOptions& options) {
  if (const auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&options)) return sgd->weight_decay();
  return dynamic_cast<const torch::optim::AdamWOptions&>(options).weight_decay();
}

void run(const fs::path& dir, const std::string& name, const std::vector<Param>& params, const Variant& v, int steps,
         int resume_at) {
  std::vector<at::Tensor> init;
  for (size_t i = 0; i < params.size(); ++i)
    init.push_back(read_raw(dir / ("param_" + std::to_string(i) + ".bin"), params[i].shape));
  const tp::OptimSection o = section(v, name);
  std::vector<tp::StateTensor> state = model_state(params, init);
  tp::BuiltOptimizer built = tp::make_optimizer(o, state);
  std::ofstream groups(dir / ("host_groups_" + v.label + ".txt"));
  std::vector<double> base_lrs;
  for (size_t g = 0; g < built.group_names.size(); ++g) {
    const auto& options = built.optimizer->param_groups()[g].options();
    char line[96];
    std::snprintf(line, sizeof line, "%.17g %.17g", options.get_lr(), weight_decay_of(options));
    groups << line;
    for (const std::string& name : built.group_names[g]) groups << " " << name;
    groups << "\n";
    base_lrs.push_back(options.get_lr());
  }
  const bool cycle = v.keys.at("cycle") == "1";
  for (int t = 0; t < steps; ++t) {
    if (t == resume_at) {
      const std::string bytes = archive_of(*built.optimizer);
      std::vector<at::Tensor> now;
      for (const auto& s : state) now.push_back(s.tensor.detach());
      state = model_state(params, now);
      built = tp::make_optimizer(o, state);
      load_archive(*built.optimizer, bytes);
    }
    for (size_t g = 0; g < base_lrs.size(); ++g) {
      auto& options = built.optimizer->param_groups()[g].options();
      options.set_lr(base_lrs[g] * (1 + 0.1 * t));
      if (!cycle) continue;
      if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) {
        sgd->momentum(o.momentum - 0.01 * t);
      } else {
        auto& adamw = dynamic_cast<torch::optim::AdamWOptions&>(options);
        adamw.betas({o.betas[0] - 0.01 * t, o.betas[1]});
      }
    }
    for (size_t i = 0; i < state.size(); ++i)
      state[i].tensor.mutable_grad() =
          read_raw(dir / ("grad_" + std::to_string(t) + "_" + std::to_string(i) + ".bin"), params[i].shape);
    built.optimizer->step();
  }
  for (size_t i = 0; i < state.size(); ++i)
    write_raw(dir / ("host_" + v.label + "_" + std::to_string(i) + ".bin"), state[i].tensor);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc == 3 ? argv[1] : "";
  if (kind != "lamb" && kind != "lion" && kind != "lars") {
    std::fprintf(stderr, "usage: timm_optimizer_driver lamb|lion|lars DIR\n");
    return 2;
  }
  try {
    const std::string name = argv[1];
    const fs::path dir = argv[2];
    std::ifstream spec(dir / "spec.txt");
    int steps = 0, resume_at = -1;
    std::vector<Param> params;
    std::vector<Variant> variants;
    for (std::string line; std::getline(spec, line);) {
      std::istringstream in(line);
      std::string kind;
      in >> kind;
      if (kind == "steps") {
        in >> steps;
      } else if (kind == "resume_at") {
        in >> resume_at;
      } else if (kind == "param") {
        Param p;
        size_t index = 0;
        in >> index >> p.name;
        for (int64_t d = 0; in >> d;) p.shape.push_back(d);
        params.push_back(p);
      } else if (kind == "variant") {
        Variant v;
        in >> v.label;
        for (std::string kv; in >> kv;) v.keys[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
        variants.push_back(v);
      } else if (kind == "rule") {
        std::string label, pattern, key, value;
        in >> label >> pattern >> key >> value;
        for (Variant& v : variants) {
          if (v.label != label) continue;
          if (v.rules.empty() || v.rules.back().pattern != pattern)
            v.rules.push_back({pattern, std::nullopt, std::nullopt});
          (key == "lr" ? v.rules.back().lr : v.rules.back().weight_decay) = std::stod(value);
        }
      }
    }
    for (const Variant& v : variants) run(dir, name, params, v, steps, resume_at);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "timm_optimizer_driver: %s\n", e.what());
    return 1;
  }
}
