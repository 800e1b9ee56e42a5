// org.torchhost.torchscript through its C ABI, on modules torchscript_oracle.py scripts and saves:
// state names, outputs equal to the eager PyTorch modules (train and eval mode, BatchNorm
// statistics), every output form (Tensor, tuple, list, dict), gradients reaching the module's
// parameters, device/dtype moves, and each refusal with its message.
#include "plugins/models/zoo_model.h"
#include "support/test_paths.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iterator>

namespace {

using namespace tp::test;
using Config = std::map<std::string, FakeConfig::Value>;
using Names = std::vector<std::string>;

constexpr const char* kTorchscriptLibrary = "torchscript";
constexpr const char* kTorchscriptId = "org.torchhost.torchscript";

/// The directory the oracle scripted its modules into, written once per test process.
const std::filesystem::path& scripted() {
  static const std::filesystem::path dir = [] {
    auto d = fresh_dir("zoo_torchscript_modules");
    run_python("tests/plugins/models/torchscript_oracle.py", "script '" + d.string() + "'");
    return d;
  }();
  return dir;
}

/// "io.pt": inputs and the eager modules' outputs (a plain dict of tensors).
const std::map<std::string, at::Tensor>& io() {
  static const std::map<std::string, at::Tensor> values = [] {
    std::ifstream in(scripted() / "io.pt", std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::map<std::string, at::Tensor> out;
    for (const auto& item : torch::jit::pickle_load(bytes).toGenericDict())
      out[item.key().toStringRef()] = item.value().toTensor();
    return out;
  }();
  return values;
}

Config ts_config(const std::string& file, Names inputs, Names outputs) {
  const std::filesystem::path path =
      file.find('/') == std::string::npos ? scripted() / file : std::filesystem::path(file);
  return {{"path", path.string()}, {"inputs", std::move(inputs)}, {"outputs", std::move(outputs)}};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("torchscript: an MLP with BatchNorm has its scripted names and the eager module's outputs") {
  ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("mlp.pt", {"x"}, {"pred"}));
  std::map<std::string, bool> names;
  for (const auto& e : m.state()) names[e.name] = e.is_buffer;
  const std::map<std::string, bool> expected = {
      {"fc1.weight", false}, {"fc1.bias", false}, {"bn.weight", false}, {"bn.bias", false},
      {"head.weight", false}, {"head.bias", false}, {"bn.running_mean", true}, {"bn.running_var", true},
      {"bn.num_batches_tracked", true}};
  CHECK(names == expected);
  CHECK((m.t->set_activation_checkpointing == nullptr));  // the host refuses the switch by name

  Fields in = {{"x", io().at("x")}, {"y", at::zeros({8, 1})}};
  m.train(false);
  const auto eval = m.forward(in);
  REQUIRE(eval.size() == 1);
  CHECK(relative_difference(eval.at("pred").detach(), io().at("mlp.eval")) <= 1e-6);
  m.train(true);  // batch statistics, and the running ones move
  const at::Tensor pred = m.forward(in).at("pred");
  CHECK(relative_difference(pred.detach(), io().at("mlp.train")) <= 1e-6);
  for (const char* b : {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}) {
    CAPTURE(b);
    CHECK(relative_difference(m.named(b).to(at::kDouble), io().at(std::string("mlp.after.") + b).to(at::kDouble)) <= 1e-6);
  }

  // Gradients reach the handles the host holds, and the host's in-place updates reach the module.
  pred.pow(2).sum().backward();
  for (const auto& e : m.state()) {
    CAPTURE(e.name);
    if (!e.is_buffer) CHECK(tensor_of(e.handle).grad().defined());
  }
  m.train(false);
  const at::Tensor before = m.forward(in).at("pred").detach();
  {
    at::NoGradGuard no_grad;
    m.named("head.bias").add_(1.0);
  }
  CHECK(at::allclose(m.forward(in).at("pred").detach(), before + 1.0));
}

TEST_CASE("torchscript: freeze_bn_stats keeps the scripted BatchNorm1d in eval mode while the model trains") {
  ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("mlp.pt", {"x"}, {"pred"}));
  CHECK((m.t->layer_depths == nullptr)); // a scripted module declares no depths: layer_decay is refused
  REQUIRE_MESSAGE(m.t->set_batchnorm_frozen(m.self, true) == TP_OK, m.error());
  const at::Tensor mean_before = m.named("bn.running_mean").clone();
  Fields in = {{"x", io().at("x")}, {"y", at::zeros({8, 1})}};
  m.train(true);
  // The eval-mode output (running statistics), and the statistics do not move.
  CHECK(relative_difference(m.forward(in).at("pred").detach(), io().at("mlp.eval")) <= 1e-6);
  CHECK(at::equal(m.named("bn.running_mean"), mean_before));
  CHECK(m.named("bn.num_batches_tracked").item<int64_t>() == 0);
  // Switched off, the next set_training(true) trains the BatchNorm again: Python's train-mode output.
  REQUIRE(m.t->set_batchnorm_frozen(m.self, false) == TP_OK);
  m.train(true);
  CHECK(relative_difference(m.forward(in).at("pred").detach(), io().at("mlp.train")) <= 1e-6);
  CHECK(m.named("bn.num_batches_tracked").item<int64_t>() == 1);
}

TEST_CASE("torchscript: to_device converts floating state, keeps integer buffers, casts inputs") {
  ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("mlp.pt", {"x"}, {"pred"}));
  REQUIRE_MESSAGE(m.t->to_device(m.self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT64) == TP_OK, m.error());
  CHECK((m.named("fc1.weight").scalar_type() == at::kDouble));
  CHECK((m.named("bn.num_batches_tracked").scalar_type() == at::kLong));
  m.train(false);
  Fields in = {{"x", io().at("x")}};
  const at::Tensor out = m.forward(in).at("pred");
  CHECK((out.scalar_type() == at::kDouble));
  CHECK(relative_difference(out.detach(), io().at("mlp.eval")) <= 1e-6);
}

TEST_CASE("torchscript: tuple, list and dict outputs are named") {
  Fields x = {{"x", io().at("x")}};
  {
    ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("tuple.pt", {"x"}, {"logits", "total"}));
    const auto out = m.forward(x);
    CHECK(out.size() == 2);
    CHECK(relative_difference(out.at("logits").detach(), io().at("tuple.0")) <= 1e-6);
    CHECK(relative_difference(out.at("total").detach(), io().at("tuple.1")) <= 1e-6);
  }
  {
    ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("list.pt", {"x"}, {"a", "b"}));
    const auto out = m.forward(x);
    CHECK(relative_difference(out.at("a").detach(), io().at("list.0")) <= 1e-6);
    CHECK(relative_difference(out.at("b").detach(), io().at("list.1")) <= 1e-6);
    ZooModel three(kTorchscriptLibrary, kTorchscriptId, ts_config("list.pt", {"x"}, {"a", "b", "c"}));
    std::map<std::string, at::Tensor> ignored;
    CHECK(three.try_forward(x, ignored) == TP_ERR_INVALID_ARGUMENT);
    CHECK(contains(three.error(), "a list of 2 tensors"));
  }
  {
    // Two inputs, passed positionally; `outputs` does not apply to a dict.
    Fields ab = {{"b", io().at("b")}, {"a", io().at("a")}};
    ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("dict.pt", {"a", "b"}, {"logits"}));
    const auto out = m.forward(ab);
    CHECK(out.size() == 2);
    CHECK(relative_difference(out.at("sum").detach(), io().at("dict.sum")) <= 1e-6);
    CHECK(relative_difference(out.at("prod").detach(), io().at("dict.prod")) <= 1e-6);
    ZooModel one(kTorchscriptLibrary, kTorchscriptId, ts_config("dict.pt", {"a"}, {"logits"}));  // b has a default
    CHECK(relative_difference(one.forward(ab).at("sum_a").detach(), io().at("dict.sum_a")) <= 1e-6);
  }
}

TEST_CASE("torchscript: refusals name the file and say what to do") {
  auto refused = [](const Config& config, tp_status code, const std::vector<std::string>& parts) {
    ZooModel m(kTorchscriptLibrary, kTorchscriptId, config, 1, /*expect_ok=*/false);
    CHECK(m.status == code);
    for (const auto& part : parts) {
      CAPTURE(part);
      CHECK_MESSAGE(contains(m.error(), part), m.error());
    }
  };
  refused(ts_config("missing.pt", {"x"}, {"pred"}), TP_ERR_IO, {"missing.pt", "no such file", "torch.jit.script"});
  refused(ts_config("relative/missing.pt", {"x"}, {"pred"}), TP_ERR_IO, {"working directory"});
  refused(ts_config(std::string(tp::test::source_dir()) + "/tests/plugins/models/torchscript_oracle.py", {"x"}, {"pred"}),
          TP_ERR_CONFIG, {"not a TorchScript archive (not a zip file)"});
  refused(ts_config("state_dict.pt", {"x"}, {"pred"}), TP_ERR_CONFIG,
          {"state_dict.pt", "is a torch.save file", "not a TorchScript archive", "torch.jit.script(model).save",
           "train.init_weights"});
  refused(ts_config("other.zip", {"x"}, {"pred"}), TP_ERR_CONFIG,
          {"other.zip", "is not a TorchScript archive LibTorch can load (", "torch.jit.script(model).save"});
  refused(ts_config("mlp.pt", {"x", "y"}, {"pred"}), TP_ERR_CONFIG,
          {"forward(x: Tensor) takes 1 argument", "inputs = [\"x\", \"y\"] names 2"});
  refused(ts_config("dict.pt", {}, {"pred"}), TP_ERR_CONFIG, {"takes 1 to 2 arguments"});
  refused(ts_config("returns_int.pt", {"x"}, {"pred"}), TP_ERR_CONFIG, {"forward returns int", "Dict[str, Tensor]"});
  refused(ts_config("tuple.pt", {"x"}, {"pred"}), TP_ERR_CONFIG, {"(2 tensors)", "names 1"});
  refused(ts_config("mlp.pt", {"x"}, {"a", "a"}), TP_ERR_CONFIG, {"must name each output once"});
  refused({{"path", std::string()}, {"inputs", Names{"x"}}, {"outputs", Names{"pred"}}}, TP_ERR_CONFIG, {"path is empty"});

  ZooModel m(kTorchscriptLibrary, kTorchscriptId, ts_config("mlp.pt", {"x"}, {"pred"}));
  Fields wrong = {{"image", io().at("x")}};
  std::map<std::string, at::Tensor> ignored;
  CHECK(m.try_forward(wrong, ignored) == TP_ERR_INVALID_ARGUMENT);
  CHECK(contains(m.error(), "no input named 'x' (present: image)"));
}

}  // namespace
