// `host verify` (docs/verify.md): the user's configuration, with their plugins, through short
// checks that catch the bugs which otherwise surface hours into a job as a run that will not
// learn, will not resume or will not scale. Each check family lives in its own file:
//   verify_data.cpp         samples repeat, batches do not depend on the workers, fields stable and finite
//   verify_loss.cpp         a batch's loss sum and count are those of its halves added
//   verify_metric.cpp       a batch's metric state is its halves' states added
//   verify_gradients.cpp    every trainable parameter gets a finite, non-zero gradient
//   verify_accumulation.cpp B x 1 trains like B/k x k
//   verify_resume.cpp       stop, resume: the weights of an uninterrupted run, bit for bit
//   verify_distributed.cpp  2 ranks x B/2 train like 1 x B; a 2-rank evaluation equals 1-rank
//   verify_overfit.cpp      the loss on 2 batches falls below 5% of its start
// The first four run in this process on components built as `host predict` builds them
// (verify_context.cpp); the training checks run `host train` as child processes
// (verify_child.h) and compare the checkpoints they write.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "session.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/data/sample_source.h"
#include "tp/framework/engine/run_components.h"

namespace tp::cli::verify {

/// How a check ended. Only kFail makes `host verify` exit with kExitVerifyFailed.
enum class Status { kPass, kFail, kSkip };

/// One row of the table.
struct CheckResult {
  CheckResult(std::string name, std::string limit) : check(std::move(name)), threshold(std::move(limit)) {}

  std::string check;               ///< "data", "loss", ...
  Status status = Status::kPass;
  std::string measured;            ///< what was measured ("3.1e-07", "0 of 12 tensors differ")
  double seconds = 0.0;            ///< how long the check took (filled by command_verify.cpp)
  std::string threshold;           ///< what it had to stay under ("< 1e-05 relative", "bitwise")
  std::string reason;              ///< one line: what was compared, or why it failed or was skipped
  std::vector<std::string> notes;  ///< further lines: each problem, "differs by design: ..."
};

/// The model's own randomness in training mode (dropout, stochastic depth), which makes a
/// micro-batch or a rank draw other masks than the whole batch: comparisons differ by design.
struct ModelRandomness {
  bool random = false;               ///< two train-mode forwards of the first batch from different seeds differ
  std::vector<std::string> off_sets; ///< --set values that switch it off: each conventional key (dropout,
                                     ///< attention_dropout, drop_rate, drop_path, drop_path_rate,
                                     ///< stochastic_depth_prob) the model's table holds at a non-zero value, at 0
};

/// What the checks share: the session (config, plugins, device), the work directory and the
/// components of the in-process checks, built on first use.
class VerifyContext {
 public:
  /// `work_dir` is <run dir>/verify, already created and empty.
  VerifyContext(const Options& options, Session& session, std::filesystem::path work_dir);
  ~VerifyContext();
  VerifyContext(const VerifyContext&) = delete;
  VerifyContext& operator=(const VerifyContext&) = delete;

  const Options& options() const noexcept { return options_; }
  const RunConfig& config() const noexcept { return session_.config; }
  /// cuda:N or cpu, from run.device: where the in-process checks run.
  c10::Device device() const;
  /// The directory of one check (<work dir>/<check>), created.
  std::filesystem::path check_dir(const std::string& check) const;
  /// Optimizer steps of each training check (--steps).
  int64_t steps() const noexcept { return options_.steps; }

  /// [main] The run's components (the train and val datasets, model, loss, metrics), created on
  /// first use; the model is on device() in float32 and the metrics too. Throws what
  /// create_components throws (ConfigError, PluginError).
  RunComponents& parts();
  /// The model's parameters and buffers on device() (valid after parts()).
  const std::vector<StateTensor>& model_state();
  /// CPU copies of the model's state as created (with train.init_weights applied, as `host train`
  /// does): the weights every training check's runs start from, since create_components seeds
  /// the generator with run.seed before creating the model. Costs one copy of the model.
  const NamedWeights& initial_weights();
  /// [main] The first min(train.batch_size, size) samples of the training split in index order,
  /// collated and on device(), loaded once (no shuffling, no worker threads).
  const NamedTensors& first_batch();
  /// [main] As first_batch, from the split the run's metrics are evaluated on: the first
  /// min(train.batch_size, size) samples of the val split where the run has one (a dataset may
  /// give evaluation-only fields there, as coco_detection's gt_*), else first_batch(). With its
  /// split's batch layout in `layout`.
  const NamedTensors& first_evaluation_batch(const BatchLayout** layout);
  /// [main] Whether the model draws random numbers in training mode, and how to switch that off;
  /// probed once (two train-mode forwards under no_grad; the model's state and the CPU generator
  /// are restored).
  const ModelRandomness& model_randomness();

 private:
  const Options& options_;
  Session& session_;
  std::filesystem::path work_dir_;
  std::unique_ptr<RunComponents> parts_;
  std::vector<StateTensor> model_state_;
  NamedWeights initial_weights_;
  std::optional<NamedTensors> first_batch_;
  std::optional<NamedTensors> first_evaluation_batch_;
  std::optional<ModelRandomness> randomness_;
};

/// Why batches of other sizes give the model other tensors for the same samples: "[data.train]
/// pads image to each batch's largest sample, ..." when the training split pads a field (a
/// micro-batch or a rank's share pads to its own largest, so a detector sees other anchors and a
/// convolution other borders), else "". For the accumulation and distributed checks.
std::string padding_by_design(VerifyContext& context);

/* The checks: each returns its row; a plugin failing inside a check is a FAIL naming the call
   (command_verify.cpp turns a tp::Error escaping a check into that row). */

CheckResult check_data(VerifyContext& context);
CheckResult check_loss(VerifyContext& context);
CheckResult check_metric(VerifyContext& context);
CheckResult check_gradients(VerifyContext& context);
CheckResult check_accumulation(VerifyContext& context);
CheckResult check_resume(VerifyContext& context);
CheckResult check_distributed(VerifyContext& context);
CheckResult check_overfit(VerifyContext& context);

/// "PASS", "FAIL" or "SKIP".
const char* status_name(Status status);
/// `value` for the table: whole numbers as such ("64"), others in 3 significant digits ("3.1e-07").
std::string format_value(double value);
/// Prints the table header (once), then rows as they finish.
void print_header(const std::string& config, const std::filesystem::path& work_dir);
void print_row(const CheckResult& row);

/// Whether `a` and `b` hold the same dtype, shape and bytes (NaN equals itself, -0.0 != 0.0).
bool same_bits(const at::Tensor& a, const at::Tensor& b);
/// The first field where two samples or batches differ ("field 'image'", "the field names"), or
/// "" when they are the same bits.
std::string first_difference(const NamedTensors& a, const NamedTensors& b);
/// The first of the first 8 samples of `split` (epoch 0) that differs when read as rank 0 and as
/// rank 1 (their ctx->seed differs): a dataset that augments does, by design (PLG-8), so 2 ranks
/// cannot train exactly like 1. nullopt when none differs.
std::optional<uint64_t> first_sample_differing_by_rank(DatasetProxy& split, uint64_t run_seed);

/// The first half (`first` = true) or the rest of each tensor along dim 0, at `half` rows; a
/// ragged field of `layout` by its offsets (tp::batch_rows). Every tensor must have at least
/// `half` rows (batch-first); throws tp::Error naming the first that has not, so a model whose
/// output is not batch-first is reported rather than mis-sliced.
NamedTensors slice_rows(const NamedTensors& tensors, int64_t half, bool first, const std::string& what,
                        const BatchLayout& layout = {});

}  // namespace tp::cli::verify
