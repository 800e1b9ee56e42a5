// train.init_weights: load_initial_weights() reads Python's torch.save(model.state_dict()) (an
// OrderedDict with _metadata, which torch::pickle_load alone refuses), a dict holding it under
// "model", a .safetensors file and a host checkpoint, all to the same values; and refuses, with
// a ConfigError naming the key, the file and the names, anything that does not match exactly.
#include <ATen/ATen.h>

#include <fstream>
#include <string>
#include <vector>

#include "integration/host_runner.h"
#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/checkpoint/initial_weights.h"
#include "tp/framework/error.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  bool is_buffer;
};

// Net of initial_weights_files.py, in state_dict order.
const std::vector<Entry> kNet = {{"fc.weight", {4, 3}, false},     {"fc.bias", {4}, false},
                                 {"bn.weight", {4}, false},        {"bn.bias", {4}, false},
                                 {"bn.running_mean", {4}, true},   {"bn.running_var", {4}, true},
                                 {"bn.num_batches_tracked", {}, true}};

std::vector<tp::StateTensor> zero_model() {
  std::vector<tp::StateTensor> state;
  for (const Entry& e : kNet) {
    const bool counter = e.name == "bn.num_batches_tracked";
    at::Tensor t = at::zeros(e.shape, counter ? at::kLong : at::kFloat);
    if (!e.is_buffer) t.requires_grad_();
    state.push_back({e.name, t, e.is_buffer});
  }
  return state;
}

void check_values(const std::vector<tp::StateTensor>& state) {
  for (size_t i = 0; i < state.size(); ++i) {
    INFO(state[i].name);
    const at::Tensor& t = state[i].tensor;
    if (state[i].name == "bn.num_batches_tracked") {
      CHECK(t.item<int64_t>() == 7);
      continue;
    }
    const at::Tensor expected = at::arange(t.numel(), at::kFloat).reshape(t.sizes()) * 0.25 + static_cast<double>(i);
    CHECK(at::equal(t.detach(), expected));
  }
}

std::filesystem::path files() {
  static const std::filesystem::path dir = [] {
    const auto d = tp::test::fresh_dir("initial_weights");
    const auto run = tp::test::run_shell(std::string("'") + tp::test::python() +
                                         "' tests/integration_oracle/initial_weights_files.py '" + d.string() + "'");
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    return d;
  }();
  return dir;
}

std::string error_of(const std::filesystem::path& file, const std::vector<tp::StateTensor>& state) {
  try {
    tp::load_initial_weights(file, state);
  } catch (const tp::ConfigError& e) {
    CHECK(e.key_path() == "train.init_weights");
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("initial weights from torch.save(state_dict), a nested dict, safetensors and a host checkpoint") {
  for (const char* name : {"state_dict.pt", "nested.pt", "weights.safetensors"}) {
    INFO(name);
    const auto state = zero_model();
    tp::load_initial_weights(files() / name, state);
    check_values(state);
    CHECK(state[0].tensor.requires_grad());  // still the model's leaf, filled in place
  }
  // A host checkpoint written from those values reads back through its "model" entry.
  const auto source = zero_model();
  tp::load_initial_weights(files() / "state_dict.pt", source);
  tp::CheckpointContents contents;
  contents.model_state = &source;
  contents.config_toml = "";
  tp::save_checkpoint(files() / "host.pt", contents);
  const auto state = zero_model();
  tp::load_initial_weights(files() / "host.pt", state);
  check_values(state);
}

TEST_CASE("a single-entry torch.save dict loads") {
  std::vector<tp::StateTensor> state{{"fc.weight", at::zeros({4, 3}), false}};
  tp::load_initial_weights(files() / "single.pt", state);
  CHECK(at::equal(state[0].tensor, at::arange(12, at::kFloat).reshape({4, 3}) * 0.25));
}

TEST_CASE("names and shapes must match exactly, and nothing is copied otherwise") {
  auto state = zero_model();
  state.erase(state.begin() + 1);                                    // fc.bias: unexpected in the file
  state.push_back({"head.weight", at::zeros({2, 4}), false});        // missing from the file
  state[0].tensor = at::zeros({3, 3});                               // fc.weight: another shape
  const std::string message = error_of(files() / "state_dict.pt", state);
  CHECK(message.find("state_dict.pt") != std::string::npos);
  CHECK(message.find("missing 'head.weight'") != std::string::npos);
  CHECK(message.find("unexpected 'fc.bias'") != std::string::npos);
  CHECK(message.find("'fc.weight' [4, 3] in the file, [3, 3] in the model") != std::string::npos);
  CHECK(at::equal(state[1].tensor, at::zeros({4})));  // bn.weight untouched
}

TEST_CASE("a damaged host checkpoint is refused by its seal before LibTorch reads it (exit 4)") {
  const auto source = zero_model();
  tp::load_initial_weights(files() / "state_dict.pt", source);
  tp::CheckpointContents contents;
  contents.model_state = &source;
  contents.config_toml = "";
  const auto damaged = files() / "damaged.pt";
  tp::save_checkpoint(damaged, contents);
  std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(std::filesystem::file_size(damaged) / 2));
  const char byte = static_cast<char>(file.peek());
  file.seekp(static_cast<std::streamoff>(std::filesystem::file_size(damaged) / 2));
  file.put(static_cast<char>(byte ^ 0x10));
  file.close();
  const auto state = zero_model();
  try {
    tp::load_initial_weights(damaged, state);
    FAIL("a damaged checkpoint loaded");
  } catch (const tp::CheckpointError& e) {
    CHECK(e.exit_code() == tp::kExitCheckpoint);
    CHECK(std::string(e.what()).find("damaged.pt") != std::string::npos);
  }
  CHECK(at::equal(state[0].tensor, at::zeros({4, 3})));  // nothing copied
}

TEST_CASE("unreadable files are ConfigErrors naming the file") {
  const auto state = zero_model();
  CHECK(error_of(files() / "no_such_file.pt", state).find("cannot be opened") != std::string::npos);
  const std::string garbage = error_of(files() / "garbage.pt", state);
  CHECK(garbage.find("garbage.pt") != std::string::npos);
  CHECK(garbage.find("cannot read initial weights") != std::string::npos);
}

TEST_CASE("train.init_weights_ignore: a new head of another size keeps its own init; the rest stays strict") {
  // The fine-tuning case: the file's "fc" is [4, 3]; this model's head has 5 outputs.
  auto state = zero_model();
  state[0].tensor = at::full({5, 3}, 9.0f);
  state[1].tensor = at::full({5}, 9.0f);
  const tp::InitialWeightsReport report = tp::load_initial_weights(files() / "state_dict.pt", state, {"fc.*"});
  CHECK(report.loaded == 5);
  CHECK(report.kept_model == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(report.ignored_file == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(at::equal(state[0].tensor, at::full({5, 3}, 9.0f))); // its own init
  for (std::size_t i = 2; i < state.size(); ++i) {
    INFO(state[i].name);
    const at::Tensor& t = state[i].tensor;
    if (state[i].name == "bn.num_batches_tracked") CHECK(t.item<int64_t>() == 7);
    else CHECK(at::equal(t.detach(), at::arange(t.numel(), at::kFloat).reshape(t.sizes()) * 0.25 + static_cast<double>(i)));
  }

  // Still strict outside the globs: a missing buffer is refused, and the message no longer
  // suggests the key it already uses.
  auto partial = zero_model();
  partial.push_back({"extra.weight", at::zeros({2}), false});
  std::string message;
  try {
    tp::load_initial_weights(files() / "state_dict.pt", partial, {"fc.*"});
  } catch (const tp::ConfigError& e) {
    message = e.what();
  }
  CHECK(message.find("missing 'extra.weight'") != std::string::npos);

  // A glob that matches nothing is a typo, named by its index.
  try {
    tp::load_initial_weights(files() / "state_dict.pt", zero_model(), {"fc.*", "classifier.*"});
    FAIL("an unused glob was accepted");
  } catch (const tp::ConfigError& e) {
    CHECK(e.key_path() == "train.init_weights_ignore[1]");
    CHECK(std::string(e.what()).find("\"classifier.*\" matches no name") != std::string::npos);
  }
}

TEST_CASE("without train.init_weights_ignore a head of another size is refused, naming the key that helps") {
  auto state = zero_model();
  state[0].tensor = at::zeros({5, 3});
  state[1].tensor = at::zeros({5});
  const std::string message = error_of(files() / "state_dict.pt", state);
  CHECK(message.find("'fc.weight' [4, 3] in the file, [5, 3] in the model") != std::string::npos);
  CHECK(message.find("train.init_weights_ignore") != std::string::npos);
}

TEST_CASE("train.init_weights_prefix reads a Lightning checkpoint's and a DDP state_dict's names; a refusal names it") {
  // Without the key, the refusal finds the prefix under which every missing name lies.
  const std::string lightning = error_of(files() / "lightning.ckpt", zero_model());
  CHECK(lightning.find("train.init_weights_prefix = \"model.\"") != std::string::npos);
  const std::string ddp = error_of(files() / "ddp.safetensors", zero_model());
  CHECK(ddp.find("train.init_weights_prefix = \"module.\"") != std::string::npos);

  auto state = zero_model();
  const tp::InitialWeightsReport report = tp::load_initial_weights(files() / "lightning.ckpt", state, {}, "model.");
  check_values(state);
  CHECK(report.loaded == 7);
  CHECK(report.outside_prefix == 1);  // the loss's buffer, left unread
  const auto from_ddp = zero_model();
  tp::load_initial_weights(files() / "ddp.safetensors", from_ddp, {}, "module.");
  check_values(from_ddp);

  // The globs apply to the names without the prefix, on both sides.
  auto head = zero_model();
  head[0].tensor = at::full({5, 3}, 9.0f);
  head[1].tensor = at::full({5}, 9.0f);
  const auto kept = tp::load_initial_weights(files() / "lightning.ckpt", head, {"fc.*"}, "model.");
  CHECK(kept.loaded == 5);
  CHECK(kept.ignored_file == std::vector<std::string>{"fc.weight", "fc.bias"});

  // A prefix that no name begins with is refused under its own key, showing the file's names.
  try {
    tp::load_initial_weights(files() / "lightning.ckpt", zero_model(), {}, "net.");
    FAIL("a prefix no name begins with was accepted");
  } catch (const tp::ConfigError& e) {
    CHECK(e.key_path() == "train.init_weights_prefix");
    CHECK(std::string(e.what()).find("'model.fc.weight'") != std::string::npos);
  }
  // A prefix too short for the model (the names under it still carry "fc" twice) names the rest.
  const std::string partial = [&] {
    try {
      tp::load_initial_weights(files() / "lightning.ckpt", zero_model(), {}, "mod");
    } catch (const tp::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }();
  CHECK(partial.find("train.init_weights_prefix = \"model.\"") != std::string::npos);
}
