#include "tp/framework/plugin/plugin_check.h"

#include <ATen/ATen.h>

#include <optional>

#include "tp/framework/config/validate.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/batch_transform_proxy.h"
#include "tp/framework/plugin/callback_proxy.h"
#include "tp/framework/plugin/loss_proxy.h"
#include "tp/framework/plugin/metric_proxy.h"
#include "tp/framework/plugin/model_inputs.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "plugin_check_dataset.h"
#include "sized_copy.h"

namespace tp {
namespace {

std::string shape_text(const at::Tensor& t) {
  return std::string(c10::toString(t.scalar_type())) + c10::str(t.sizes());
}

std::string check_model(ComponentEntry entry, const ComponentConfig& config, const CheckOptions& options) {
  ModelProxy model(entry, config);
  model.to_device(c10::Device(c10::kCPU));
  const auto state = model.state();
  int64_t parameters = 0;
  for (const auto& s : state)
    if (!s.is_buffer) parameters += s.tensor.numel();
  model.set_training(true);
  // The run's model (--config) falls back to the run's first training samples where it declares
  // no examples or they do not fit the run's options (an image_size the examples do not have).
  FallbackInputs fallback;
  if (entry.info->id == options.run_model && !options.run_inputs.empty())
    fallback = [&options] { return options.run_inputs; };
  const std::optional<ModelRun> run = run_on_model_inputs(model, *entry.info, 2, fallback);
  if (!run) {
    const std::string why = options.run_inputs_error.empty() || entry.info->id != options.run_model
                                ? "" : " (the run's training samples could not be read: " + options.run_inputs_error + ")";
    return std::to_string(parameters) + " parameters; no example inputs declared, forward not run" + why;
  }
  const std::string inputs = run->why_not_examples.empty()
                                 ? "its example inputs"
                                 : "the run's first training samples (" + run->why_not_examples + ")";
  const NamedTensors& outputs = run->outputs;
  at::Tensor total = at::zeros({});
  std::string names;
  for (const auto& [name, t] : outputs) {
    names += (names.empty() ? "" : ", ") + name + " " + shape_text(t);
    if (t.is_floating_point() && t.requires_grad()) total = total + t.to(at::kFloat).sum();
  }
  if (!total.requires_grad()) throw Error("no output requires grad: forward ran without autograd history");
  total.backward();
  std::string missing;
  for (const auto& s : state)
    if (!s.is_buffer && s.tensor.requires_grad() && !s.tensor.grad().defined()) missing += " " + s.name;
  if (!missing.empty()) throw Error("parameters without a gradient after backward:" + missing);
  return std::to_string(parameters) + " parameters; on " + inputs + ": outputs " + names +
         "; every parameter has a gradient";
}

// Applies the transform twice with one seed to the examples batch: the same fields must come out
// (PLG-8: the seed is its only randomness).
std::string check_batch_transform(ComponentEntry entry, const ComponentConfig& config) {
  BatchTransformProxy transform(entry, config);
  if (entry.info->examples.empty()) return "created; no example inputs declared, apply not run";
  const NamedTensors batch = example_batch(entry.info->examples, 4);
  const NamedTensors first = transform.apply(42, batch);
  const NamedTensors again = transform.apply(42, batch);
  std::string names;
  for (std::size_t i = 0; i < first.size(); ++i) {
    names += (names.empty() ? "" : ", ") + first[i].first + " " + shape_text(first[i].second);
    if (i >= again.size() || again[i].first != first[i].first || !at::equal(again[i].second, first[i].second))
      throw Error("apply with the same seed gave a different '" + first[i].first + "' (PLG-8)");
  }
  return "fields after apply: " + names + "; equal for equal seeds";
}

using DestroyFn = void (*)(void*);

DestroyFn destroy_of(const ComponentInfo& info) {
  switch (info.kind) {
    case TP_KIND_DATASET: return detail::sized_copy<tp_dataset_v1_t>(info.interface_table).destroy;
    case TP_KIND_MODEL: return detail::sized_copy<tp_model_v1_t>(info.interface_table).destroy;
    case TP_KIND_LOSS: return detail::sized_copy<tp_loss_v1_t>(info.interface_table).destroy;
    case TP_KIND_METRIC: return detail::sized_copy<tp_metric_v1_t>(info.interface_table).destroy;
    case TP_KIND_BATCH_TRANSFORM: return detail::sized_copy<tp_batch_transform_v1_t>(info.interface_table).destroy;
    default: return detail::sized_copy<tp_callback_v1_t>(info.interface_table).destroy;
  }
}

// The options `component` is created with: the caller's, or none (its defaults).
ComponentConfig config_of(const std::map<std::string, ComponentConfig>& configs, const std::string& id) {
  const auto found = configs.find(id);
  return found != configs.end() ? found->second : ComponentConfig{id, "check", {}};
}

// Required keys (no default) that `config` leaves without a value.
std::string missing_keys(const ComponentConfig& config, const ComponentInfo& info) {
  std::string missing;
  for (const KeySpec& key : info.schema)
    if (key.default_literal.empty() && !config.options.contains(key.path)) missing += (missing.empty() ? "" : ", ") + key.path;
  return missing;
}

// Creates, uses and destroys one component; throws for a plugin fault.
std::string check_component(const ComponentEntry& entry, ComponentConfig config, const CheckOptions& options,
                            std::vector<std::string>& warnings) {
  const ComponentInfo& info = *entry.info;
  if (info.kind == TP_KIND_DATASET) {
    ComponentConfig val = options.val_configs.contains(info.id) ? options.val_configs.at(info.id) : config;
    ComponentConfig test = options.test_configs.contains(info.id) ? options.test_configs.at(info.id) : config;
    validate_component(val, info.schema, options.source_file);
    validate_component(test, info.schema, options.source_file);
    detail::DatasetCheck checked = detail::check_dataset(entry, config, val, test, options);
    warnings = std::move(checked.warnings);
    return checked.summary;
  }
  // The proxies' calls that run plugin code without a crash marker of their own (create,
  // to_device, visit_state, reset, destroy) are attributed to this one; forward, update and
  // on_event name themselves.
  const PluginCallScope scope(info.id.c_str(), "create, setup or destroy", UINT64_MAX);
  switch (info.kind) {
    case TP_KIND_MODEL: return check_model(entry, config, options);
    case TP_KIND_LOSS: LossProxy(entry, config); return "created and destroyed";
    case TP_KIND_BATCH_TRANSFORM: return check_batch_transform(entry, config);
    case TP_KIND_METRIC: {
      MetricProxy metric(entry, config);
      metric.to_device(c10::Device(c10::kCPU));
      metric.reset();
      return std::to_string(metric.state().size()) + " state tensors";
    }
    case TP_KIND_CALLBACK: {
      CallbackProxy callback(entry, config);
      tp_event_t event{};
      event.struct_size = sizeof event;
      event.kind = TP_EVENT_FIT_BEGIN;
      callback.on_event(event);
      return "accepted a fit-begin event";
    }
    default: return "not exercised (unknown kind)";
  }
}

}  // namespace

std::vector<CheckLine> check_library(const std::shared_ptr<PluginLibrary>& library, const CheckOptions& options) {
  std::vector<CheckLine> lines;
  auto add = [&](CheckLine line) {
    if (options.report) options.report(line);
    lines.push_back(std::move(line));
  };
  for (const ComponentInfo& info : library->components()) {
    const ComponentEntry entry{&info, library};
    ComponentConfig config = config_of(options.configs, info.id);
    if (const std::string missing = missing_keys(config, info); !missing.empty()) {
      add({info.id, false, "not created: no value for required key(s) " + missing +
                               "; give them with --set KEY=VALUE or a run's table with --config FILE", true});
      continue;
    }
    validate_component(config, info.schema, options.source_file); // a bad value the caller gave: ConfigError
    try {
      std::vector<std::string> warnings;
      std::string what = check_component(entry, std::move(config), options, warnings);
      {
        const PluginCallScope scope(info.id.c_str(), "destroy(NULL)", UINT64_MAX);
        destroy_of(info)(nullptr); // PLG-12: every destroy accepts NULL
      }
      add({info.id, true, what + "; destroy(NULL) safe"});
      for (std::string& warning : warnings) add({info.id, true, std::move(warning), false, true});
    } catch (const std::exception& e) {
      add({info.id, false, e.what()});
    }
  }
  return lines;
}

}  // namespace tp
