// The components of the in-process checks, built once by assemble_run as every command builds
// them: the datasets prepared and created, the model placed on the run's device, one batch loaded.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/StringUtil.h>

#include <mutex>

#include "tp/framework/data/collate.h"
#include "tp/framework/data/data_loader.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/error.h"
#include "run_assembly.h"
#include "verify/verify.h"

namespace tp::cli::verify {

VerifyContext::VerifyContext(const Options& options, Session& session, std::filesystem::path work_dir)
    : options_(options), session_(session), work_dir_(std::move(work_dir)) {}

// Members go in reverse order: the batch and the state handles before the components, and
// within those the datasets last (RunComponents' order).
VerifyContext::~VerifyContext() = default;

c10::Device VerifyContext::device() const { return session_.device(); }

std::filesystem::path VerifyContext::check_dir(const std::string& check) const {
  std::filesystem::path dir = work_dir_ / check;
  std::filesystem::create_directories(dir);
  return dir;
}

RunComponents& VerifyContext::parts() {
  if (parts_) return *parts_;
  AssembledRun run = assemble_run(session_, RunRequest{.command = "host verify",
                                                       .splits = {.train = true, .val = true},
                                                       .initial_weights = true});
  parts_ = std::make_unique<RunComponents>(std::move(run.parts));
  const BatchPlacement placement(device(), config().run.channels_last);
  model_state_ = placement.place_model(*parts_->model);
  for (const StateTensor& s : model_state_)
    initial_weights_.emplace_back(s.name, s.tensor.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
  for (auto& metric : parts_->metrics) metric->to_device(device());
  return *parts_;
}

const std::vector<StateTensor>& VerifyContext::model_state() {
  parts();
  return model_state_;
}

const NamedWeights& VerifyContext::initial_weights() {
  parts();
  return initial_weights_;
}

namespace {

// The first batch of `data` in index order, no workers, on `device`: the checks see the same
// samples whatever the config's shuffle and num_workers (the data check compares those).
NamedTensors first_batch_of(const std::shared_ptr<DatasetProxy>& data, const RunConfig& config, c10::Device device,
                            const char* split) {
  DataLoader loader(data, LoaderOptions()
                              .batch_size(config.train.batch_size)
                              .num_workers(0)
                              .shuffle(false)
                              .seed(static_cast<uint64_t>(config.run.seed)));
  loader.start_epoch(0);
  std::optional<NamedTensors> batch = loader.next();
  if (!batch || batch->empty())
    throw Error(std::string("host verify: the ") + split + " split " + data->name() + " gave no batch to check with.");
  return BatchPlacement(device, config.run.channels_last).to_device(std::move(*batch));
}

}  // namespace

std::string padding_by_design(VerifyContext& context) {
  std::string padded;
  for (const FieldBatching& field : context.parts().train_data->batch_layout().fields())
    if (field.batching == Batching::kPad) padded += (padded.empty() ? "" : ", ") + field.name;
  if (padded.empty()) return "";
  return "[" + dataset_table(context.config(), "train")->key_path + "] pads " + padded +
         " to each batch's largest sample, and a smaller batch pads to its own largest, so the model sees other "
         "tensor sizes for the same samples (a detector other anchors, a convolution other borders)";
}

const NamedTensors& VerifyContext::first_batch() {
  if (!first_batch_) first_batch_ = first_batch_of(parts().train_data, config(), device(), "training");
  return *first_batch_;
}

const NamedTensors& VerifyContext::first_evaluation_batch(const BatchLayout** layout) {
  RunComponents& p = parts();
  if (!p.val_data) {
    *layout = &p.train_data->batch_layout();
    return first_batch();
  }
  *layout = &p.val_data->batch_layout();
  if (!first_evaluation_batch_) first_evaluation_batch_ = first_batch_of(p.val_data, config(), device(), "val");
  return *first_evaluation_batch_;
}

const ModelRandomness& VerifyContext::model_randomness() {
  if (randomness_) return *randomness_;
  RunComponents& p = parts();
  const NamedTensors& batch = first_batch();
  std::vector<at::Tensor> saved; // a train-mode forward moves BatchNorm statistics
  for (const StateTensor& s : model_state_) saved.push_back(s.tensor.detach().clone());
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor generator_state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator_state = generator.get_state();
  }
  auto forward_from_seed = [&](uint64_t seed) {
    at::manual_seed(seed);
    c10::NoGradGuard no_grad;
    return p.model->forward(batch);
  };
  p.model->set_training(true);
  const NamedTensors a = forward_from_seed(1);
  const NamedTensors b = forward_from_seed(2);
  p.model->set_training(false);
  {
    c10::NoGradGuard no_grad;
    for (std::size_t i = 0; i < model_state_.size(); ++i) model_state_[i].tensor.detach().copy_(saved[i]);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(generator_state);
  }
  ModelRandomness found;
  found.random = !first_difference(a, b).empty();
  if (found.random)
    for (const char* key : {"dropout", "attention_dropout", "drop_rate", "drop_path", "drop_path_rate",
                            "stochastic_depth_prob"})
      if (const auto value = config().model.options[key].value<double>(); value && *value != 0.0)
        found.off_sets.push_back(std::string("model.") + key + "=0.0");
  randomness_ = std::move(found);
  return *randomness_;
}

NamedTensors slice_rows(const NamedTensors& tensors, int64_t half, bool first, const std::string& what,
                        const BatchLayout& layout) {
  if (!layout.empty()) {
    const int64_t rows = batch_size(tensors, layout);
    return first ? batch_rows(tensors, 0, half, layout) : batch_rows(tensors, half, rows - half, layout);
  }
  NamedTensors out;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.dim() == 0 || tensor.size(0) <= half)
      throw Error("host verify: " + what + " '" + name + "' has shape " + c10::str(tensor.sizes()) +
                  ", not [B, ...] with B > " + std::to_string(half) +
                  ": the check splits every batch field and model output along its first dimension.");
    out.emplace_back(name, first ? tensor.narrow(0, 0, half) : tensor.narrow(0, half, tensor.size(0) - half));
  }
  return out;
}

}  // namespace tp::cli::verify
