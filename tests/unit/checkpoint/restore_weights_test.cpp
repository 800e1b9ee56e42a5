// restore_weights (a checkpoint's weights into the model, for --resume, host eval, load_best_at_end
// and the weight averages): a checkpoint of another model is refused with a message of a few
// lines, the first few names of each kind and their counts, and nothing copied. Before issue 41
// (item 14) the message listed every tensor: 15 KB for a ResNet checkpoint given to another model.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

std::vector<tp::StateTensor> named_state(const std::string& prefix, int count, int64_t size) {
  std::vector<tp::StateTensor> state;
  for (int i = 0; i < count; ++i) state.push_back({prefix + std::to_string(i) + ".weight", at::zeros({size}), false});
  return state;
}

tp::NamedWeights named_weights_of(const std::vector<tp::StateTensor>& state) {
  tp::NamedWeights weights;
  for (const auto& s : state) weights.emplace_back(s.name, at::ones_like(s.tensor));
  return weights;
}

std::string restore_error(const tp::NamedWeights& weights, const std::vector<tp::StateTensor>& state) {
  try {
    tp::restore_weights(weights, state);
  } catch (const tp::ConfigError& e) { // exit 2: the configuration's model is not the checkpoint's
    CHECK(e.exit_code() == tp::kExitConfig);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a checkpoint of another model: a short message with the first names of each kind and counts") {
  const auto model = named_state("layer", 300, 4);
  const auto other = named_weights_of(named_state("block", 320, 4));
  const std::string message = restore_error(other, model);
  INFO(message);
  CHECK(message.size() < 1000);
  CHECK(message.find("300 tensors in the model, 320 in the checkpoint") != std::string::npos);
  CHECK(message.find("missing 'layer0.weight'") != std::string::npos);
  CHECK(message.find("(300 in all)") != std::string::npos);
  CHECK(message.find("unexpected 'block0.weight'") != std::string::npos);
  CHECK(message.find("(320 in all)") != std::string::npos);
  CHECK(message.find("'layer299.weight'") == std::string::npos);
  CHECK(message.find("another model or model options") != std::string::npos);
  for (const auto& s : model) CHECK(at::equal(s.tensor, at::zeros({4}))); // nothing copied
}

TEST_CASE("other shapes are named with both shapes; matching weights are copied") {
  const auto model = named_state("layer", 3, 4);
  auto reshaped = named_weights_of(model);
  reshaped[1].second = at::ones({5});
  const std::string message = restore_error(reshaped, model);
  INFO(message);
  CHECK(message.find("other shapes: 'layer1.weight' [5] in the checkpoint, [4] in the model") != std::string::npos);
  CHECK(message.find("missing") == std::string::npos);
  CHECK(at::equal(model[0].tensor, at::zeros({4})));

  CHECK(restore_error(named_weights_of(model), model).empty());
  for (const auto& s : model) CHECK(at::equal(s.tensor, at::ones({4})));
}
