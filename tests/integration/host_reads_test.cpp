// The sync audit on the CPU (issue 42, ARCH-15): a training step between two logging steps asks
// the device for no value on the host, counted here through LibTorch's dispatcher so the rule
// holds before any GPU runs it. A counting kernel sits in front of every operator while a
// HostReadCount lives and notes the operators whose result the host must wait for on a device
// (a scalar read, a data-dependent shape, a comparison returning a bool); on CUDA the same reads
// are what run.sync_debug reports and the GPU suite's audit fails on (tests/gpu). Copies to the
// host cannot be told apart from other copies on the CPU: those are the GPU suite's.
//
// Steps are told apart from the rest of a run (start-up, the epoch's loss read, the end) by
// training the same config twice, with 8 and 16 optimizer steps in its one epoch and no logging
// step: the reads that grow with the steps are the steps' own.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Backtrace.h>
#include <torch/library.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tp/framework/config/load.h"
#include "engine/training/nan_policy.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/registry.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include "support/doctest_after_torch.h"

namespace {

/// Operators whose result a device must hand to the host before the host can go on: on CUDA each
/// is a stream synchronisation (torch.cuda.set_sync_debug_mode reports the same ones). Counted
/// where the engine or a plugin calls them, not inside another operator: LibTorch's CPU kernels
/// read their own arguments on the host (the fused Adam's lr and step counts), which its CUDA
/// kernels do not, and `item` reaches `_local_scalar_dense` inside.
const std::vector<std::string> kHostReadOperators = {
    "aten::item",        "aten::_local_scalar_dense", "aten::is_nonzero",  "aten::nonzero",
    "aten::masked_select", "aten::equal",             "aten::allclose",    "aten::_unique",
    "aten::_unique2",    "aten::unique_dim",          "aten::unique_consecutive", "aten::repeat_interleave",
    "aten::bincount",    "aten::histc"};
/// Indexing reads the host when an index is a boolean mask (its nonzero() decides the shape).
const std::vector<std::string> kIndexOperators = {"aten::index", "aten::index_put_", "aten::_index_put_impl_"};

using ReadCounts = std::map<std::string, int64_t>;

/// What a HostReadCount notes: the counts by operator, and the call stacks that read.
struct HostReads {
  ReadCounts counts;
  std::map<std::string, std::string> callers;
};

/// The reads of the HostReadCount alive on this thread; null when none is.
thread_local HostReads* active_reads = nullptr;
/// Operators this thread is inside: only the outermost call is the caller's own.
thread_local int operator_depth = 0;

bool has_boolean_index(const torch::jit::Stack& stack) {
  for (const c10::IValue& value : stack) {
    if (!value.isList()) continue;
    for (const c10::IValue& element : value.toListRef())
      if (element.isTensor() && element.toTensor().scalar_type() == at::kBool) return true;
  }
  return false;
}

/// The name under which `op` counts as a host read with these arguments; "" when it does not.
std::string host_read_name(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::string& name = op.schema().operator_name().name;
  for (const std::string& read : kHostReadOperators)
    if (name == read) return name;
  for (const std::string& index : kIndexOperators)
    if (name == index && has_boolean_index(stack)) return name + " (boolean mask)";
  return "";
}

/// The counting kernel: notes a host read called from outside any operator, then passes the call
/// on to the kernels below this key.
void count_host_reads(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  if (active_reads != nullptr && operator_depth == 0) {
    if (const std::string name = host_read_name(op, *stack); !name.empty()) {
      // Each distinct call stack once (a few): addr2line -f -C -e <test binary> <offset> names
      // the test binary's frames.
      ++active_reads->counts[name];
      std::string& callers = active_reads->callers[name];
      const std::string trace = c10::get_backtrace(/*frames_to_skip=*/2, /*maximum_number_of_frames=*/12);
      if (callers.find(trace) == std::string::npos && callers.size() < 12000) callers += trace + "----\n";
    }
  }
  ++operator_depth;
  try {
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                                  c10::DispatchKey::TESTING_ONLY_GenericMode),
                       stack);
  } catch (...) {
    --operator_depth;
    throw;
  }
  --operator_depth;
}

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&count_host_reads>());
}

/// While it lives, the host reads of this thread's operators (and of the autograd engine's work
/// it starts, which carries the thread's dispatch keys) are counted by operator name.
class HostReadCount {
 public:
  HostReadCount() : include_(c10::DispatchKey::TESTING_ONLY_GenericMode) { active_reads = &reads_; }
  ~HostReadCount() { active_reads = nullptr; }
  HostReadCount(const HostReadCount&) = delete;
  HostReadCount& operator=(const HostReadCount&) = delete;
  const HostReads& reads() const noexcept { return reads_; }

 private:
  HostReads reads_;
  c10::impl::IncludeDispatchKeyGuard include_;
};

/// The C dataset plugin (plugins/template/tier_s_c_dataset) feeding a small model, as
/// c_regression.toml; `model` is the [model] table. No evaluation: its split would grow with the
/// training split, and its forwards with it.
std::string host_reads_config(const std::string& model) {
  return "[run]\ndevice = \"cpu\"\n[train]\nepochs = 1\nbatch_size = 4\ngrad_accum_steps = 2\n"
         "log_every_steps = 1000\n[optim]\nname = \"adamw\"\nlr = 0.05\n[data]\nnum_workers = 0\n"
         "[data.train]\ncomponent = \"org.torchhost.test.c_regression\"\n[model]\n" +
         model + "\n[loss]\ncomponent = \"org.torchhost.mse\"\noutput = \"logits\"\ntarget = \"y\"\n"
         "[eval]\nstrategy = \"no\"\n[checkpoint]\nstrategy = \"no\"\nsave_top_k = 0\n[progress]\nmode = \"off\"\n";
}

const std::string kMlp = "component = \"org.torchhost.mlp\"\ninput = \"x\"\nin_features = 4\nhidden = [8]\nnum_classes = 1";

/// The host reads of one epoch of `samples` samples in batches of 4, two micro-batches per
/// optimizer step, no logging step, with the [model] table `model` and `overrides`.
HostReads reads_of_run(int64_t samples, const std::string& model, const std::vector<std::string>& overrides) {
  tp::Logger logger;
  tp::HostServices services(logger, tp::ProcessPlace{});
  tp::Registry registry(services);
  registry.load_search_path({{tp::test::fixture_plugin_dir(), "--plugin-dir"}, {tp::test::plugin_dir(), "built-in"}});
  const auto dir = tp::test::fresh_dir("host_reads_" + std::to_string(samples));
  const auto file = dir / "run.toml";
  std::ofstream(file) << host_reads_config(model);
  std::vector<std::string> all = {"run.output_dir=\"" + (dir / "run").string() + "\"",
                                  "data.train.size=" + std::to_string(samples)};
  all.insert(all.end(), overrides.begin(), overrides.end());
  tp::RunConfig config = tp::load_run_config(file, all, {});
  tp::resolve_components(config, registry);
  tp::RunComponents parts = tp::create_components(config, registry);
  tp::Trainer trainer(config, parts, c10::Device(c10::kCPU), logger, dir / "run");
  HostReadCount count;
  trainer.fit();
  return count.reads();
}

/// The reads that 8 more optimizer steps (16 micro-batches) add to a run: the steps' own; where
/// each operator was read, for the message.
struct AddedReads {
  ReadCounts counts;
  std::string callers;
};

AddedReads reads_of_8_steps(const std::string& model, const std::vector<std::string>& overrides) {
  const HostReads short_run = reads_of_run(64, model, overrides);
  const HostReads long_run = reads_of_run(128, model, overrides);
  AddedReads added{long_run.counts, ""};
  for (const auto& [name, count] : short_run.counts) added.counts[name] -= count;
  std::erase_if(added.counts, [](const auto& entry) { return entry.second == 0; });
  for (const auto& [name, callers] : long_run.callers) added.callers += "\n" + name + " read at:\n" + callers;
  return added;
}

std::string reads_text(const ReadCounts& counts) {
  std::string out;
  for (const auto& [name, count] : counts) out += name + " x" + std::to_string(count) + "; ";
  return out.empty() ? "none" : out;
}

constexpr int64_t kAddedMicroBatches = 16;

}  // namespace

TEST_CASE("a training step between two logging steps reads nothing on the host but the CPU's loss check") {
  // Every per-step feature on: bf16 autocast, clipping (its norm stays on the device), a schedule
  // that changes the lr every step, the EMA, "skip" (which must decide before the update).
  for (const char* policy : {"stop", "skip"}) {
    CAPTURE(policy);
    const AddedReads added = reads_of_8_steps(
        kMlp, {"amp.precision=\"bf16\"", "train.max_grad_norm=0.5", "schedule.name=\"cosine\"", "ema.enabled=true",
         std::string("train.nan_policy=\"") + policy + "\""});
    // On the CPU the non-finite check reads each micro-batch's loss: free there, and on CUDA made
    // at the logging read instead (nan_policy.h). Nothing else may read.
    ReadCounts expected;
    const tp::NanPolicy parsed = tp::try_parse_choice<tp::NanPolicy>(policy).value();
    if (tp::nan_checks(tp::Precision::Bf16, c10::DeviceType::CPU, parsed).per_step)
      expected["aten::item"] = kAddedMicroBatches;
    CHECK_MESSAGE(added.counts == expected, "8 optimizer steps read on the host: " << reads_text(added.counts)
                                                                                   << " (expected " << reads_text(expected)
                                                                                   << ")" << added.callers);
  }
}

TEST_CASE("the count sees a plugin model's read of its own output") {
  // uncapturable_model checks its logits with .item() in every forward (what PLG-11 forbids): one
  // more read per micro-batch than the step's own.
  const AddedReads added = reads_of_8_steps("component = \"org.torchhost.test.uncapturable_model\"\nfeatures = 4\n"
                                            "hidden = 8\nnum_classes = 1\ninput = \"x\"",
                                            {});
  const ReadCounts expected = {{"aten::item", 2 * kAddedMicroBatches}};
  CHECK_MESSAGE(added.counts == expected, reads_text(added.counts) << added.callers);
}
