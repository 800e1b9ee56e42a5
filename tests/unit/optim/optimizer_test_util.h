// Helpers of the optimizer tests: [optim] sections with the schema defaults, a small named model
// state, deterministic tensors, raw float32 files for the Python oracle, and running it.
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sstream>

#include "tp/framework/config/run_config.h"
#include "tp/framework/error.h"
#include "tp/framework/optim/optimizer_factory.h"
#include "tp/framework/plugin/plugin_instance.h"
#include "support/test_paths.h"

namespace tp::test {

/// [optim] with the schema's defaults (configs/reference.toml) and the given optimizer.
inline OptimSection optim_section(const std::string& name, const std::string& implementation = "auto") {
  OptimSection o;
  o.name = name;
  o.lr = 1e-3;
  o.lr_base = 0.0;
  o.lr_base_size = 256;
  o.lr_base_scale = "auto";
  o.weight_decay = 0.01;
  o.momentum = 0.9;
  o.dampening = 0.0;
  o.nesterov = false;
  o.betas = {0.9, 0.999};
  o.eps = 1e-8;
  o.amsgrad = false;
  o.alpha = 0.99;
  o.centered = false;
  o.bias_correction = true;
  o.grad_averaging = true;
  o.lamb_max_grad_norm = 1.0;
  o.trust_clip = false;
  o.always_adapt = false;
  o.trust_coeff = 0.001;
  o.caution = false;
  o.implementation = implementation;
  o.layer_decay = 1.0;
  return o;
}

/// Deterministic floats in [-amplitude, amplitude) from an LCG (no library RNG involved).
inline at::Tensor lcg_tensor(uint64_t& state, const std::vector<int64_t>& shape, double amplitude) {
  at::Tensor t = at::empty(shape, at::kFloat);
  float* data = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(state >> 40) / static_cast<double>(1 << 24);
    data[i] = static_cast<float>((2.0 * unit - 1.0) * amplitude);
  }
  return t;
}

/// Parameter names and shapes of the small model the optimizer tests use.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
};
inline const std::vector<ParamSpec>& model_spec() {
  static const std::vector<ParamSpec> spec = {
      {"fc.weight", {6, 5}}, {"fc.bias", {6}}, {"norm.weight", {6}}, {"head.weight", {3, 6}}, {"head.bias", {3}}};
  return spec;
}

/// Leaf tensors requiring grad, named per model_spec(), as ModelProxy::state() lists them.
inline std::vector<StateTensor> model_state(const std::vector<at::Tensor>& values) {
  std::vector<StateTensor> state;
  for (size_t i = 0; i < values.size(); ++i)
    state.push_back({model_spec()[i].name, values[i].clone().requires_grad_(), false});
  return state;
}

/// A model state (model_state()) and the optimizer built over it.
struct OptimizerRun {
  std::vector<StateTensor> state;
  BuiltOptimizer built;
};

inline OptimizerRun start_optimizer_run(const OptimSection& o, const std::vector<at::Tensor>& values) {
  OptimizerRun run{model_state(values), {}};
  run.built = make_optimizer(o, run.state);
  return run;
}

/// Starting values of model_spec()'s parameters, drawn from `seed` (uniform in [-0.5, 0.5]).
inline std::vector<at::Tensor> model_values(uint64_t& seed) {
  std::vector<at::Tensor> out;
  for (const auto& p : model_spec()) out.push_back(lcg_tensor(seed, p.shape, 0.5));
  return out;
}

/// `count` optimizer steps of `run`, each on new gradients drawn from `seed` (uniform in [-1, 1]).
inline void step_with_random_gradients(OptimizerRun& run, uint64_t& seed, int count) {
  for (int t = 0; t < count; ++t) {
    for (auto& s : run.state) s.tensor.mutable_grad() = lcg_tensor(seed, s.tensor.sizes().vec(), 1.0);
    run.built.optimizer->step();
  }
}

/// The key path of the ConfigError building the optimizer of `o` over `values` raises, "" when none.
inline std::string config_error_key(const OptimSection& o, const std::vector<at::Tensor>& values) {
  try {
    start_optimizer_run(o, values);
  } catch (const ConfigError& e) {
    return e.key_path();
  }
  return "";
}

/// The run's parameter values, detached copies.
inline std::vector<at::Tensor> values_of(const OptimizerRun& run) {
  std::vector<at::Tensor> out;
  for (const auto& s : run.state) out.push_back(s.tensor.detach().clone());
  return out;
}

/// What optimizer.save() writes, as bytes (a checkpoint's optimizer entry).
inline std::string archive_of(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

/// optimizer.load() of archive_of()'s bytes.
inline void load_archive(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  optimizer.load(archive);
}

inline void write_raw(const std::filesystem::path& file, const at::Tensor& t) {
  const at::Tensor c = t.detach().contiguous().to(at::kFloat);
  std::ofstream(file, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
}

inline at::Tensor read_raw(const std::filesystem::path& file, const std::vector<int64_t>& shape) {
  at::Tensor t = at::empty(shape, at::kFloat);
  std::ifstream in(file, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "the oracle did not write " << file);
  in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * sizeof(float)));
  REQUIRE(in.gcount() == static_cast<std::streamsize>(t.numel() * sizeof(float)));
  return t;
}

/// A fresh directory under the build tree for one test's exchange files.
inline std::filesystem::path exchange_dir(const std::string& name) {
  const auto dir = std::filesystem::path(tp::test::build_dir()) / "test-runs" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// Runs `script` (a path under the source tree) with tp::test::python() and `args`; returns its
/// output and fails the test on a non-zero exit.
inline std::string run_python(const std::string& script, const std::string& args) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()),
                  "the oracle needs the project venv (scripts/setup): " << tp::test::python());
  const std::string command =
      std::string("'") + tp::test::python() + "' '" + tp::test::source_dir() + "/" + script + "' " + args + " 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  REQUIRE_MESSAGE(status == 0, "python oracle failed:\n" << output);
  return output;
}

/// max |a - b| / max |b| over the tensor: relative to the tensor's scale, so elements that
/// happen to be near zero do not dominate.
inline double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item<double>();
}

}  // namespace tp::test
