// Checkpoints timm's train.py and Lightning write (tests/fixtures/foreign_checkpoints, made by its
// make.py with timm 1.0.31 and lightning 2.6.6, which checks there that each file holds the values
// below). train.init_weights reads their weights and steps over the rest (an optimizer state with
// one-element lists, timm's argparse.Namespace, Lightning's callbacks and loops); given to
// --resume or --checkpoint, they are named for what they are (migration trial, findings 1 and 5).
// Before, init_weights refused both ("the pickle uses opcode 0x61", pickle's APPEND) and the
// checkpoint reader called them damaged, quoting a LibTorch INTERNAL ASSERT.
#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/test_paths.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/initial_weights.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

const std::filesystem::path kFixtures =
    std::filesystem::path(tp::test::source_dir()) / "tests/fixtures/foreign_checkpoints";

// make.py's Net (Linear(3, 4) -> BatchNorm1d(4)), zeroed, in state_dict order.
std::vector<tp::StateTensor> zero_net() {
  std::vector<tp::StateTensor> state;
  const std::vector<std::pair<const char*, std::vector<int64_t>>> shapes = {
      {"fc.weight", {4, 3}}, {"fc.bias", {4}}, {"bn.weight", {4}}, {"bn.bias", {4}},
      {"bn.running_mean", {4}}, {"bn.running_var", {4}}, {"bn.num_batches_tracked", {}}};
  for (const auto& [name, shape] : shapes) {
    const bool counter = std::string(name) == "bn.num_batches_tracked";
    state.push_back({name, at::zeros(shape, counter ? at::kLong : at::kFloat), counter || std::string(name).find("running") != std::string::npos});
  }
  return state;
}

// make.py's values: floating tensor i holds arange(numel) * 0.25 + i, the counter 7 (the EMA copy
// holds 100 more, so reading it instead of "state_dict" fails here).
void check_values(const std::vector<tp::StateTensor>& state) {
  for (size_t i = 0; i < state.size(); ++i) {
    INFO(state[i].name);
    const at::Tensor& t = state[i].tensor;
    if (t.scalar_type() == at::kLong) {
      CHECK(t.item<int64_t>() == 7);
      continue;
    }
    CHECK(at::equal(t, at::arange(t.numel(), at::kFloat).reshape(t.sizes()) * 0.25 + static_cast<double>(i)));
  }
}

std::string checkpoint_error(const std::string& file) {
  try {
    tp::load_checkpoint(kFixtures / file);
  } catch (const tp::CheckpointError& e) {  // exit 4
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("train.init_weights reads the weights of timm's CheckpointSaver file, not its EMA copy") {
  const auto state = zero_net();
  const tp::InitialWeightsReport report = tp::load_initial_weights(kFixtures / "timm_model_best.pth.tar", state);
  CHECK(report.loaded == 7);
  check_values(state);
}

TEST_CASE("train.init_weights reads a Lightning Trainer.save_checkpoint file under its prefix") {
  const auto state = zero_net();
  const tp::InitialWeightsReport report = tp::load_initial_weights(kFixtures / "lightning.ckpt", state, {}, "model.");
  CHECK(report.loaded == 7);
  CHECK(report.outside_prefix == 0);
  check_values(state);
}

TEST_CASE("train.init_weights steps over lists, tuple-keyed dicts, big ints and bytes beside the weights") {
  for (const char* file : {"extras.pt", "state_dict.pt"}) {
    INFO(file);
    const auto state = zero_net();
    tp::load_initial_weights(kFixtures / file, state);
    check_values(state);
  }
}

TEST_CASE("--resume/--checkpoint on a foreign file names what it is and points to train.init_weights") {
  const std::string lightning = checkpoint_error("lightning.ckpt");
  CHECK(lightning.find("is not a torchhost checkpoint") != std::string::npos);
  CHECK(lightning.find("Lightning checkpoint") != std::string::npos);
  CHECK(lightning.find("train.init_weights = \"" + (kFixtures / "lightning.ckpt").string() + "\"") != std::string::npos);
  CHECK(lightning.find("train.init_weights_prefix = \"model.\"") != std::string::npos);

  const std::string timm = checkpoint_error("timm_model_best.pth.tar");
  CHECK(timm.find("timm train.py checkpoint") != std::string::npos);
  CHECK(timm.find("train.init_weights = ") != std::string::npos);

  const std::string plain = checkpoint_error("state_dict.pt");
  CHECK(plain.find("plain state_dict") != std::string::npos);
  CHECK(plain.find("train.init_weights_prefix") != std::string::npos);

  for (const std::string& message : {lightning, timm, plain, checkpoint_error("extras.pt")}) {
    INFO(message);
    CHECK(message.find("INTERNAL ASSERT") == std::string::npos);
    CHECK(message.find("report a bug") == std::string::npos);
    CHECK(message.find("damaged") == std::string::npos);
  }
}
