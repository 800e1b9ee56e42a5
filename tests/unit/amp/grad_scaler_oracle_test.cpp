// Oracle: the same fp16 mixed-precision training run in C++ (AutocastGuard + tp::GradScaler +
// torch::optim::SGD) and in Python (torch.autocast + torch.amp.GradScaler + torch.optim.SGD, run
// by tp::test::python()). Weights, inputs and targets are passed to Python as exact hex floats.
//
// The run overflows on its own (init_scale 2^20 is far too large for fp16 gradients, so the first
// steps are skipped while the scale backs off), grows the scale (growth_interval 3), and has one
// forced overflow (loss * 1e38 at kForcedStep). Compared per step: whether the optimizer stepped,
// the scale and growth tracker after update() (exact), the loss; at the end: the weights
// (relative 1e-6) and the scaler state. Two variants: plain step(), and unscale + clip + step.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>

#include "amp_test_helpers.h"
#include "tp/framework/amp/autocast_guard.h"
#include "tp/framework/amp/grad_scaler.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kGradScalerOracleSteps = 16;
constexpr int kForcedStep = 10;
constexpr double kInitScale = 1048576.0;  // 2^20
constexpr int64_t kGrowthInterval = 3;
constexpr double kLr = 0.1;
constexpr double kMomentum = 0.9;
constexpr double kClipNorm = 0.5;
const std::vector<std::vector<int64_t>> kParamShapes = {{16, 8}, {16}, {4, 16}, {4}};
const std::vector<double> kParamAmplitude = {0.35, 0.1, 0.25, 0.1};

// Deterministic floats in [-amplitude, amplitude): an LCG, so no library RNG is involved.
at::Tensor lcg_tensor(uint64_t& state, std::vector<int64_t> shape, double amplitude) {
  at::Tensor t = at::empty(shape, at::kFloat);
  float* data = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(state >> 40) / static_cast<double>(1 << 24);  // [0, 1), 24 bits
    data[i] = static_cast<float>((2.0 * unit - 1.0) * amplitude);
  }
  return t;
}

struct Data {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> inputs, targets;
};

Data make_data() {
  uint64_t state = 20240611;
  Data d;
  for (std::size_t i = 0; i < kParamShapes.size(); ++i) d.params.push_back(lcg_tensor(state, kParamShapes[i], kParamAmplitude[i]));
  for (int t = 0; t < kGradScalerOracleSteps; ++t) {
    d.inputs.push_back(lcg_tensor(state, {4, 8}, 2.0));
    d.targets.push_back(lcg_tensor(state, {4, 4}, 1.0));
  }
  return d;
}

struct Trace {
  std::vector<int> stepped;
  std::vector<double> scale;  // after update()
  std::vector<int64_t> growth_tracker;
  std::vector<double> loss;
  std::vector<at::Tensor> params;
  tp::GradScalerState state;
};

Trace run_cpp(const Data& data, bool clip) {
  std::vector<at::Tensor> params;
  for (const auto& p : data.params) params.push_back(p.clone().requires_grad_());
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(kLr).momentum(kMomentum));
  tp::GradScaler scaler(tp::GradScalerOptions().init_scale(kInitScale).growth_interval(kGrowthInterval));
  Trace trace;
  for (int t = 0; t < kGradScalerOracleSteps; ++t) {
    sgd.zero_grad();
    at::Tensor loss;
    {
      tp::AutocastGuard autocast(c10::DeviceType::CPU, tp::Precision::Fp16);
      loss = at::mse_loss(tp::test::mlp_forward(params, data.inputs[t]), data.targets[t]);
    }
    trace.loss.push_back(loss.item<float>());
    if (t == kForcedStep) loss = loss * 1e38;
    scaler.scale(loss).backward();
    if (clip) {
      scaler.unscale(sgd);
      tp::test::clip_grad_norm(params, kClipNorm);
    }
    trace.stepped.push_back(scaler.step(sgd) ? 1 : 0);
    scaler.update();
    trace.scale.push_back(scaler.get_scale());
    trace.growth_tracker.push_back(scaler.get_growth_tracker());
  }
  for (const auto& p : params) trace.params.push_back(p.detach().clone());
  trace.state = scaler.state();
  return trace;
}

std::string hex_floats(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const float* data = c.data_ptr<float>();
  std::string out;
  char buf[64];
  for (int64_t i = 0; i < c.numel(); ++i) {
    std::snprintf(buf, sizeof buf, "%a ", static_cast<double>(data[i]));
    out += buf;
  }
  return out;
}

std::string shape_text(const at::Tensor& t) {
  std::string out = "(";
  for (auto s : t.sizes()) out += std::to_string(s) + ",";
  return out + ")";
}

std::string python_script(const Data& d) {
  std::ostringstream py;
  py.precision(17);  // numbers below are read back by Python exactly
  py << "import torch\n"
        "import torch.nn.functional as F\n"
        "torch.set_num_threads(1)\n"
        "def T(text, shape):\n"
        "    return torch.tensor([float.fromhex(v) for v in text.split()], dtype=torch.float32).reshape(shape)\n";
  py << "init = [";
  for (const auto& p : d.params) py << "T('" << hex_floats(p) << "', " << shape_text(p) << "), ";
  py << "]\nbatches = [";
  for (int t = 0; t < kGradScalerOracleSteps; ++t) {
    py << "(T('" << hex_floats(d.inputs[t]) << "', (4, 8)), T('" << hex_floats(d.targets[t]) << "', (4, 4))),\n";
  }
  py << "]\n";
  py << "def run(name, clip):\n"
        "    ps = [p.clone().requires_grad_() for p in init]\n"
        "    opt = torch.optim.SGD(ps, lr=" << kLr << ", momentum=" << kMomentum << ")\n"
        "    scaler = torch.amp.GradScaler('cpu', init_scale=" << kInitScale << ", growth_factor=2.0, "
        "backoff_factor=0.5, growth_interval=" << kGrowthInterval << ")\n"
        "    print('run', name)\n"
        "    for t, (x, y) in enumerate(batches):\n"
        "        opt.zero_grad()\n"
        "        with torch.autocast('cpu', dtype=torch.float16):\n"
        "            loss = F.mse_loss(F.linear(torch.relu(F.linear(x, ps[0], ps[1])), ps[2], ps[3]), y)\n"
        "        loss_value = loss.item()\n"
        "        if t == " << kForcedStep << ":\n"
        "            loss = loss * 1e38\n"
        "        scaler.scale(loss).backward()\n"
        "        if clip:\n"
        "            scaler.unscale_(opt)\n"
        "            torch.nn.utils.clip_grad_norm_(ps, " << kClipNorm << ", foreach=True)\n"
        "        scaler.step(opt)\n"
        "        found = sum(v.item() for v in scaler._found_inf_per_device(opt).values())\n"
        "        scaler.update()\n"
        "        print('step', t, int(found == 0), scaler.get_scale().hex(), scaler._get_growth_tracker(), "
        "loss_value.hex())\n"
        "    for i, p in enumerate(ps):\n"
        "        print('param', i, ' '.join(float(v).hex() for v in p.detach().flatten().tolist()))\n"
        "    s = scaler.state_dict()\n"
        "    print('state', float(s['scale']).hex(), float(s['growth_factor']).hex(), "
        "float(s['backoff_factor']).hex(), s['growth_interval'], s['_growth_tracker'])\n"
        "run('plain', False)\n"
        "run('clip', True)\n";
  return py.str();
}

// Runs `script` with tp::test::python(); returns stdout+stderr, fails the test on a non-zero exit.
std::string run_python(const std::string& script) {
  REQUIRE_MESSAGE(std::filesystem::exists(tp::test::python()),
                  "oracle needs the project venv (scripts/setup): " << tp::test::python());
  const auto path = std::filesystem::temp_directory_path() / ("tp_amp_oracle_" + std::to_string(::getpid()) + ".py");
  std::ofstream(path) << script;
  const std::string command = std::string("'") + tp::test::python() + "' '" + path.string() + "' 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  std::filesystem::remove(path);
  REQUIRE_MESSAGE(status == 0, "python oracle failed:\n" << output);
  return output;
}

std::map<std::string, Trace> parse_python(const std::string& output) {
  std::map<std::string, Trace> runs;
  Trace* cur = nullptr;
  std::istringstream lines(output);
  std::string line;
  auto hex = [](const std::string& s) { return std::strtod(s.c_str(), nullptr); };
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "run") {
      std::string name;
      in >> name;
      cur = &runs[name];
    } else if (tag == "step") {
      int t, stepped;
      std::string scale, loss;
      int64_t tracker;
      in >> t >> stepped >> scale >> tracker >> loss;
      cur->stepped.push_back(stepped);
      cur->scale.push_back(hex(scale));
      cur->growth_tracker.push_back(tracker);
      cur->loss.push_back(hex(loss));
    } else if (tag == "param") {
      int i;
      in >> i;
      std::vector<float> values;
      for (std::string v; in >> v;) values.push_back(static_cast<float>(hex(v)));
      cur->params.push_back(at::tensor(values, at::kFloat).reshape(kParamShapes[i]));
    } else if (tag == "state") {
      std::string scale, growth, backoff;
      in >> scale >> growth >> backoff >> cur->state.growth_interval >> cur->state.growth_tracker;
      cur->state.scale = hex(scale);
      cur->state.growth_factor = hex(growth);
      cur->state.backoff_factor = hex(backoff);
    } else if (!line.empty()) {
      MESSAGE("python: " << line);  // warnings, if any
    }
  }
  return runs;
}

const std::map<std::string, Trace>& python_traces(const Data& data) {
  static const std::map<std::string, Trace> traces = parse_python(run_python(python_script(data)));
  return traces;
}

void compare(const Trace& cpp, const Trace& py, const std::string& name) {
  INFO("variant ", name);
  REQUIRE(py.stepped.size() == static_cast<std::size_t>(kGradScalerOracleSteps));
  CHECK(cpp.stepped == py.stepped);
  CHECK(cpp.scale == py.scale);
  CHECK(cpp.growth_tracker == py.growth_tracker);
  double max_loss_rel = 0.0;
  for (int t = 0; t < kGradScalerOracleSteps; ++t) {
    max_loss_rel = std::max(max_loss_rel, std::abs(cpp.loss[t] - py.loss[t]) / std::abs(py.loss[t]));
  }
  CHECK(max_loss_rel <= 1e-6);
  REQUIRE(py.params.size() == cpp.params.size());
  double max_abs = 0.0, max_rel = 0.0;
  for (std::size_t i = 0; i < cpp.params.size(); ++i) {
    const at::Tensor diff = (cpp.params[i] - py.params[i]).abs();
    max_abs = std::max(max_abs, diff.max().item<double>());
    max_rel = std::max(max_rel, (diff / py.params[i].abs().clamp_min(1e-12)).max().item<double>());
  }
  CHECK(max_rel <= 1e-6);
  CHECK(cpp.state.scale == py.state.scale);
  CHECK(cpp.state.growth_tracker == py.state.growth_tracker);
  CHECK(cpp.state.growth_factor == py.state.growth_factor);
  CHECK(cpp.state.backoff_factor == py.state.backoff_factor);
  CHECK(cpp.state.growth_interval == py.state.growth_interval);

  std::ostringstream pattern;
  for (int t = 0; t < kGradScalerOracleSteps; ++t) pattern << (cpp.stepped[t] ? 'S' : '-');
  MESSAGE(name << ": steps " << pattern.str() << " (S stepped, - skipped), final scale " << cpp.scale.back()
               << "; max |dloss|/loss " << max_loss_rel << ", max |dw| " << max_abs << ", max |dw|/|w| " << max_rel);
}

// The run must exercise what it claims to: early natural overflows, the forced one, and growth.
void check_coverage(const Trace& trace) {
  CHECK(trace.stepped[0] == 0);
  CHECK(trace.stepped[kForcedStep] == 0);
  CHECK(std::count(trace.stepped.begin(), trace.stepped.end(), 1) >= 5);
  bool grew = false;
  for (int t = 1; t < kGradScalerOracleSteps; ++t) grew = grew || trace.scale[t] > trace.scale[t - 1];
  CHECK(grew);
}

}  // namespace

TEST_CASE("GradScaler oracle: fp16 CPU training matches torch.amp.GradScaler step for step") {
  at::set_num_threads(1);  // same reduction order as the single-threaded Python run
  const Data data = make_data();
  const auto& py = python_traces(data);
  REQUIRE(py.count("plain") == 1);
  REQUIRE(py.count("clip") == 1);
  // Clipping must have changed the training, or the "clip" variant proves nothing.
  CHECK_FALSE(at::equal(py.at("plain").params[0], py.at("clip").params[0]));

  SUBCASE("scaler.step without explicit unscale") {
    const Trace cpp = run_cpp(data, /*clip=*/false);
    check_coverage(cpp);
    compare(cpp, py.at("plain"), "plain");
  }
  SUBCASE("unscale, clip_grad_norm, step") {
    const Trace cpp = run_cpp(data, /*clip=*/true);
    check_coverage(cpp);
    compare(cpp, py.at("clip"), "clip");
  }
}
