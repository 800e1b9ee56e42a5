#include "tp/framework/plugin/plugin_check.h"

#include <ATen/ATen.h>

#include "tp/framework/config/validate.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/callback_proxy.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/loss_proxy.h"
#include "tp/framework/plugin/metric_proxy.h"
#include "tp/framework/plugin/model_proxy.h"
#include "sized_copy.h"
#include "tensor_handles.h"

namespace tp {
namespace {

std::string shape_text(const at::Tensor& t) {
  return std::string(c10::toString(t.scalar_type())) + c10::str(t.sizes());
}

NamedTensors example_batch(const ComponentInfo& info, int64_t batch) {
  NamedTensors out;
  for (const auto& ex : info.examples) {
    std::vector<int64_t> shape{batch};
    shape.insert(shape.end(), ex.shape, ex.shape + ex.ndim);
    const auto dtype = detail::from_tp_dtype(ex.dtype);
    at::Tensor t = at::isFloatingType(dtype) ? at::rand(shape, at::TensorOptions().dtype(dtype))
                                             : at::randint(std::max<int64_t>(ex.class_count, 1), shape, at::TensorOptions().dtype(dtype));
    out.emplace_back(ex.name, t);
  }
  return out;
}

std::string check_dataset(ComponentEntry entry, const ComponentConfig& config) {
  DatasetProxy dataset(entry, config, "train");
  if (dataset.size() == 0) return "created; size() is 0";
  tp_worker_ctx_t ctx{sizeof(tp_worker_ctx_t), 0, 1, 0, 0, 12345};
  const NamedTensors a = dataset.get(0, ctx), b = dataset.get(0, ctx);
  std::string fields;
  for (std::size_t i = 0; i < a.size(); ++i) {
    fields += (i ? ", " : "") + a[i].first + " " + shape_text(a[i].second);
    if (i >= b.size() || b[i].first != a[i].first || !at::equal(a[i].second, b[i].second))
      throw Error("sample 0 differs between two calls with the same worker seed (field '" + a[i].first + "')");
  }
  return "size " + std::to_string(dataset.size()) + "; sample 0: " + fields + "; deterministic";
}

std::string check_model(ComponentEntry entry, const ComponentConfig& config) {
  ModelProxy model(entry, config);
  model.to_device(c10::Device(c10::kCPU));
  const auto state = model.state();
  int64_t parameters = 0;
  for (const auto& s : state)
    if (!s.is_buffer) parameters += s.tensor.numel();
  if (entry.info->examples.empty()) return std::to_string(parameters) + " parameters; no example inputs declared, forward not run";
  model.set_training(true);
  const NamedTensors outputs = model.forward(example_batch(*entry.info, 2));
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
  return std::to_string(parameters) + " parameters; outputs " + names + "; every parameter has a gradient";
}

using DestroyFn = void (*)(void*);

DestroyFn destroy_of(const ComponentInfo& info) {
  switch (info.kind) {
    case TP_KIND_DATASET: return detail::sized_copy<tp_dataset_v1_t>(info.interface_table).destroy;
    case TP_KIND_MODEL: return detail::sized_copy<tp_model_v1_t>(info.interface_table).destroy;
    case TP_KIND_LOSS: return detail::sized_copy<tp_loss_v1_t>(info.interface_table).destroy;
    case TP_KIND_METRIC: return detail::sized_copy<tp_metric_v1_t>(info.interface_table).destroy;
    default: return detail::sized_copy<tp_callback_v1_t>(info.interface_table).destroy;
  }
}

}  // namespace

std::vector<CheckLine> check_library(const std::shared_ptr<PluginLibrary>& library) {
  std::vector<CheckLine> lines;
  for (const ComponentInfo& info : library->components()) {
    const ComponentEntry entry{&info, library};
    ComponentConfig config{info.id, "check", {}};
    try {
      validate_component(config, info.schema, "");
    } catch (const std::exception& e) {
      lines.push_back({info.id, true, std::string("not created: it needs options: ") + e.what()});
      continue;
    }
    try {
      std::string what;
      switch (info.kind) {
        case TP_KIND_DATASET: what = check_dataset(entry, config); break;
        case TP_KIND_MODEL: what = check_model(entry, config); break;
        case TP_KIND_LOSS: LossProxy(entry, config); what = "created and destroyed"; break;
        case TP_KIND_METRIC: {
          MetricProxy metric(entry, config);
          metric.to_device(c10::Device(c10::kCPU));
          metric.reset();
          what = std::to_string(metric.state().size()) + " state tensors";
          break;
        }
        case TP_KIND_CALLBACK: {
          CallbackProxy callback(entry, config);
          tp_event_t event{};
          event.struct_size = sizeof event;
          event.kind = TP_EVENT_FIT_BEGIN;
          callback.on_event(event);
          what = "accepted a fit-begin event";
          break;
        }
        default: break;
      }
      destroy_of(info)(nullptr); // PLG-12: every destroy accepts NULL
      lines.push_back({info.id, true, what + "; destroy(NULL) safe"});
    } catch (const std::exception& e) {
      lines.push_back({info.id, false, e.what()});
    }
  }
  return lines;
}

}  // namespace tp
