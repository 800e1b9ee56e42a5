#include "export_outputs.h"

#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include "session.h"
#include "training_batch.h"
#include "tp/framework/config/load.h"
#include "tp/framework/data/dtype_name.h"
#include "tp/framework/engine/pixel_maps.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/plugin/model_inputs.h"
#include "tp/framework/error.h"

namespace tp::cli {
namespace {

// predictor.h's rule for the outputs `host predict` gives an argmax and a probability.
bool classification_output(const std::string& name, const at::Tensor& output) {
  const bool named = name == "logits" || (name.size() > 7 && name.ends_with("_logits"));
  return named && output.dim() == 2 && output.is_floating_point();
}

// A per-pixel output (is_pixel_map, host predict's rule): its last two sizes follow the input
// image's, so they are written "H" and "W", not the sizes of the inputs it was measured on; with
// what it means (deployment trial F9).
void describe_pixel_map(const std::string& name, const at::Tensor& output, nlohmann::ordered_json& about) {
  nlohmann::ordered_json shape = nlohmann::ordered_json::array({"N"});
  for (int64_t d = 1; d + 2 < output.dim(); ++d) shape.push_back(output.size(d));
  shape.push_back("H");
  shape.push_back("W");
  about["shape"] = std::move(shape);
  about["meaning"] =
      output.is_floating_point()
          ? "class scores per pixel before softmax, one map per image: channel i is class i (torchhost.classes[i] "
            "when the export names them); H and W are the input image's height and width; the argmax over dim 1 "
            "is the class map. host predict's png and jsonl write " + name + " at each file's size"
          : "class id per pixel, one map per image (torchhost.classes[id] when the export names them); H and W "
            "are the input image's height and width. host predict's png and jsonl write " + name +
            " at each file's size";
}

}  // namespace

std::string model_outputs_json(const Options& options, const LoadedCheckpoint& checkpoint, std::string& why_not) {
  try {
    RunConfig config = load_run_config_from_string(checkpoint.config_toml, "the checkpoint's config", {}, {});
    Logger logger;
    HostServices services(logger, ProcessPlace{});
    Registry registry(services);
    registry.allow_insecure_plugin_dirs(options.allow_insecure_plugin_dir);
    registry.load_search_path(search_path(options, config.plugin_dirs));
    resolve_components(config, registry);
    const ComponentEntry entry = registry.find(config.model.component, TP_KIND_MODEL, "model");
    ModelProxy model(entry, config.model);
    model.to_device(c10::Device(c10::kCPU));
    model.set_training(false);
    const c10::InferenceMode inference;
    const auto [inputs, outputs, why_not_examples] = *run_on_model_inputs(
        model, *entry.info, 2, [&] { return first_training_batch(config, registry, 2, "host export"); });
    nlohmann::ordered_json json = nlohmann::ordered_json::object();
    const auto has_output = [&](const std::string& wanted) {
      for (const auto& [name, output] : outputs)
        if (name == wanted) return true;
      return false;
    };
    for (const auto& [name, output] : outputs) {
      // A ragged output (a detector's boxes) stacks the rows of every image; its "<name>_offsets"
      // [N + 1] says which rows are image i's (docs/predict.md, "Detection").
      const bool ragged = has_output(name + "_offsets");
      const bool offsets = name.ends_with("_offsets") && has_output(name.substr(0, name.size() - 8));
      nlohmann::ordered_json shape = nlohmann::ordered_json::array({ragged ? "rows" : offsets ? "N + 1" : "N"});
      for (int64_t d = 1; d < output.dim(); ++d) shape.push_back(output.size(d));
      nlohmann::ordered_json about{{"shape", shape}, {"dtype", dtype_name(output.scalar_type())}};
      if (ragged)
        about["meaning"] = "ragged: the rows of every image, image i's are rows " + name + "_offsets[i] to " + name +
                           "_offsets[i + 1] - 1";
      if (classification_output(name, output) && config.loss.component == "org.torchhost.bce_with_logits")
        about["meaning"] = "label scores before the sigmoid, one row per image: column i is label i (torchhost.classes[i] "
                           "when the export names them), each on its own (trained with a binary cross entropy: "
                           "torchhost.scores = sigmoid); host predict writes " + name + ".sigmoid and " + name +
                           ".predicted (sigmoid above 0.5)";
      else if (classification_output(name, output))
        about["meaning"] = "class scores before softmax, one row per image: column i is class i (torchhost.classes[i] "
                           "when the export names them); host predict writes " + name + ".argmax, " + name +
                           ".prob (the softmax probability of the argmax) and " + name + ".class";
      if (is_pixel_map(output, inputs)) describe_pixel_map(name, output, about);
      json[name] = std::move(about);
    }
    return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } catch (const std::exception& e) {
    // The export itself needs no plugin: without the model's (or a model that cannot run its own
    // example), the file is written without this entry.
    why_not = e.what();
    return "";
  }
}

}  // namespace tp::cli
