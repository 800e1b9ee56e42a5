// Helpers of the scheduler tests: two-group optimizers, a recorder of every step's lrs and
// momenta, and the PyTorch oracle (a Python script run with tp::test::python() whose printed
// values are compared with ours).
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"
#include "support/test_paths.h"

namespace tp::test {

/// One row per step: the lr of each group, then (when recorded) each group's momentum/beta1.
using Rows = std::vector<std::vector<double>>;

/// What a run produced: its rows and, if step() refused at some point, the error text.
struct Trace {
  Rows rows;
  std::string error;
};

/// SGD with one parameter per group, group i at lrs[i]; momentum as given.
inline std::unique_ptr<torch::optim::Optimizer> make_sgd(const std::vector<double>& lrs, double momentum = 0.9) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (double lr : lrs)
    groups.emplace_back(std::vector<at::Tensor>{at::zeros({1}).requires_grad_()},
                        std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(lr).momentum(momentum)));
  return std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(lrs.at(0)).momentum(momentum));
}

/// AdamW with one parameter per group, group i at lrs[i], betas (0.9, 0.999).
inline std::unique_ptr<torch::optim::Optimizer> make_adamw(const std::vector<double>& lrs) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (double lr : lrs)
    groups.emplace_back(std::vector<at::Tensor>{at::zeros({1}).requires_grad_()},
                        std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(lr)));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(lrs.at(0)));
}

/// SGD momentum or AdamW beta1 of a group.
inline double momentum_of(const torch::optim::OptimizerParamGroup& group) {
  if (auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&group.options())) return sgd->momentum();
  if (auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&group.options()))
    return std::get<0>(adamw->betas());
  FAIL("unexpected optimizer options type");
  return 0;
}

inline std::vector<double> row_of(const LrScheduler& sched, const torch::optim::Optimizer& opt, bool momenta) {
  std::vector<double> row = sched.lrs();
  if (momenta)
    for (const auto& group : opt.param_groups()) row.push_back(momentum_of(group));
  return row;
}

/// Records the values after construction, then after each of `steps` step() calls; stops at
/// the first tp::Error and keeps its message.
inline Trace record(LrScheduler& sched, const torch::optim::Optimizer& opt, int64_t steps, bool momenta = false) {
  Trace t;
  t.rows.push_back(row_of(sched, opt, momenta));
  for (int64_t i = 0; i < steps; ++i) {
    try {
      sched.step();
    } catch (const Error& e) {
      t.error = e.what();
      break;
    }
    t.rows.push_back(row_of(sched, opt, momenta));
  }
  return t;
}

/// The Python side: helpers the case scripts call. run() prints "case NAME", one row per step
/// (lrs, then momenta when asked) with repr() (shortest round-trip, so parsing is exact), and
/// "error MSG" if PyTorch raises.
inline const char* kOraclePrelude = R"PY(
import math, warnings
warnings.simplefilter("ignore")
import torch
from torch.optim import lr_scheduler as L

def sgd(lrs, momentum=0.9):
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for lr in lrs]
    return torch.optim.SGD(groups, lr=lrs[0], momentum=momentum)

def adamw(lrs):
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for lr in lrs]
    return torch.optim.AdamW(groups, lr=lrs[0])

def row(opt, momenta):
    vals = [g["lr"] for g in opt.param_groups]
    if momenta:
        vals += [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]
    print(" ".join(repr(float(v)) for v in vals))

def run(name, opt, make, steps, momenta=False):
    print("case", name)
    try:
        sched = make(opt)
    except Exception as e:
        print("error", type(e).__name__, str(e).replace("\n", " "))
        return
    row(opt, momenta)
    for _ in range(steps):
        opt.step()
        try:
            sched.step()
        except Exception as e:
            print("error", type(e).__name__, str(e).replace("\n", " "))
            return
        row(opt, momenta)

def run_metrics(name, opt, sched, metrics):
    print("case", name)
    row(opt, False)
    for m in metrics:
        sched.step(m)
        row(opt, False)
)PY";

/// Runs kOraclePrelude + `body` with tp::test::python() and returns each case's trace by name.
/// Memoized by `body`: doctest re-enters a TEST_CASE once per SUBCASE, and each Python start
/// imports torch (seconds).
inline std::map<std::string, Trace> run_oracle(const std::string& body) {
  namespace fs = std::filesystem;
  static std::map<std::string, std::map<std::string, Trace>> memo;
  if (auto hit = memo.find(body); hit != memo.end()) return hit->second;
  static int counter = 0;
  const std::string stem = "tp_sched_oracle_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const fs::path script = fs::temp_directory_path() / (stem + ".py");
  const fs::path errors = fs::temp_directory_path() / (stem + ".err");
  std::ofstream(script) << kOraclePrelude << body;
  REQUIRE_MESSAGE(fs::exists(tp::test::python()),
                  (std::string("the PyTorch oracle needs ") + tp::test::python() +
                   " (torch installed; scripts/setup makes .venv)"));
  const std::string command = std::string("'") + tp::test::python() + "' '" + script.string() + "' 2>'" + errors.string() + "'";
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    const int status = ::pclose(pipe);
    std::ifstream err_in(errors);
    const std::string err((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
    REQUIRE_MESSAGE(status == 0, "oracle script failed:\n", err);
  } else {
    FAIL("popen failed for ", command);
  }
  fs::remove(script);
  fs::remove(errors);

  std::map<std::string, Trace> cases;
  Trace* current = nullptr;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("case ", 0) == 0) {
      current = &cases[line.substr(5)];
    } else if (line.rfind("error ", 0) == 0) {
      REQUIRE(current != nullptr);
      current->error = line.substr(6);
    } else if (!line.empty()) {
      REQUIRE(current != nullptr);
      std::vector<double> row;
      std::istringstream fields(line);
      for (std::string f; fields >> f;) row.push_back(std::strtod(f.c_str(), nullptr));
      current->rows.push_back(std::move(row));
    }
  }
  memo[body] = cases;
  return cases;
}

/// Python literal of a double, exact (17 significant digits), nan/inf included.
inline std::string py(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // keep it a float for PyTorch's checks
  return s;
}

/// Checks every value of `ours` against `oracle` (same shape; each within 1e-12 absolute or
/// relative) and returns the largest absolute difference, for the report.
inline double compare(const Rows& ours, const Rows& oracle, const std::string& what) {
  INFO(what);
  REQUIRE(ours.size() == oracle.size());
  double max_diff = 0;
  size_t mismatches = 0;
  std::string first;
  for (size_t r = 0; r < ours.size(); ++r) {
    REQUIRE(ours[r].size() == oracle[r].size());
    for (size_t c = 0; c < ours[r].size(); ++c) {
      const double a = ours[r][c], b = oracle[r][c];
      const double diff = std::fabs(a - b);
      max_diff = std::max(max_diff, diff);
      if (!(diff <= 1e-12 || diff <= 1e-12 * std::fabs(b))) {
        if (mismatches++ == 0)
          first = "step " + std::to_string(r) + " column " + std::to_string(c) + ": ours " + py(a) + ", PyTorch " + py(b);
      }
    }
  }
  CHECK_MESSAGE(mismatches == 0, mismatches, " values differ; first at ", first);
  MESSAGE(what, ": ", ours.size(), " steps, max |ours - PyTorch| = ", max_diff);
  return max_diff;
}

/// `opts` with `name` set, for one-line factory calls.
inline SchedulerOptions named(std::string name, SchedulerOptions opts = {}) {
  opts.name = std::move(name);
  return opts;
}

}  // namespace tp::test
