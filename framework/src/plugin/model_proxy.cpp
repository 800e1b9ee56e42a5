#include "tp/framework/plugin/model_proxy.h"

#include <c10/core/GradMode.h>

#include <array>
#include <set>
#include <cstddef>
#include <string>
#include <utility>

#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/plugin_crash.h"

#include "config_adapter.h"
#include "ragged_outputs.h"
#include "sized_copy.h"
#include "state_visit.h"
#include "tensor_handles.h"

namespace tp {
namespace {
// Upper bound on a model's outputs per call; generous, and a plugin that has more fails clearly.
constexpr uint32_t kMaxModelOutputs = 64;
}  // namespace

ModelProxy::ModelProxy(ComponentEntry entry, const ComponentConfig& config)
    : PluginInstance(std::move(entry)),
      table_(detail::sized_copy<tp_model_v1_t>(info_->interface_table)),
      table_size_(detail::struct_size_of(info_->interface_table)) {
  auto view = detail::make_config_view(config);
  const tp_status status =
      in_plugin_call(id().c_str(), "create", [&] { return table_.create(library_->host(), view->view(), &self_); });
  check_create(status, self_, "[" + config.key_path + "]");
}

ModelProxy::~ModelProxy() { in_plugin_call(id().c_str(), "destroy", [&] { table_.destroy(self_); }); }

void ModelProxy::to_device(const c10::Device& device, c10::ScalarType dtype) {
  check(table_.to_device(self_, detail::to_tp_device(device), device.has_index() ? device.index() : 0,
                         detail::to_tp_dtype(dtype)),
        "to_device");
  device_ = device;
}

void ModelProxy::refuse_forward(const std::string& what) const {
  throw PluginError(id(), "forward",
                    "plugin component '" + id() + "' (" + library_->path().filename().string() + ") " + what + ".");
}

void ModelProxy::set_training(bool training) { check(table_.set_training(self_, training), "set_training"); }

std::vector<StateTensor> ModelProxy::state() const {
  std::vector<StateTensor> out;
  check(table_.visit_state(self_, &detail::collect_state_entry, &out), "visit_state");
  return out;
}

NamedTensors ModelProxy::forward(const NamedTensors& inputs) {
  const auto views = detail::borrow_all(inputs);
  std::array<tp_named_tensor_t, kMaxModelOutputs> outputs{};  // zeroed: a slot left NULL holds nothing
  uint32_t count = 0;
  tp_status status = TP_OK;
  {
    // A crash inside the plugin's forward names it (plugin/plugin_crash.h); three thread-local stores.
    const PluginCallScope crash_scope(id().c_str(), "forward", UINT64_MAX, UINT64_MAX, library_->path().c_str());
    status = table_.forward(self_, views.data(), static_cast<uint32_t>(views.size()), outputs.data(), kMaxModelOutputs, &count);
  }
  // Every handle the plugin wrote is ours from here, whatever the status (PLG-9, "outputs of a
  // failed call"): adopt them all first, so no exit below leaks one.
  std::array<at::Tensor, kMaxModelOutputs> adopted;
  for (uint32_t i = 0; i < kMaxModelOutputs; ++i)
    if (outputs[i].tensor != nullptr) adopted[i] = detail::adopt(std::exchange(outputs[i].tensor, nullptr));
  check(status, "forward");
  if (count > kMaxModelOutputs)
    refuse_forward("reported " + std::to_string(count) + " outputs for a capacity of " + std::to_string(kMaxModelOutputs) +
                   ": return at most that many");
  NamedTensors result;
  result.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (!adopted[i].defined())
      refuse_forward("returned TP_OK with output " + std::to_string(i) + " of " + std::to_string(count) +
                     " NULL: set every output it counts, or fail the call");
    std::string name = outputs[i].name != nullptr ? outputs[i].name : "";
    // Outputs are looked up by name: a second one of a name would be dropped silently.
    for (uint32_t j = 0; j < i; ++j)
      if (result[j].first == name)
        refuse_forward("returned output '" + name + "' twice (outputs " + std::to_string(j) + " and " +
                       std::to_string(i) + "): each output needs its own name, the one the loss, metrics and "
                       "writers read it by; rename one in the plugin");
    // The loss, metrics and writers compute on the model's device: an output elsewhere would
    // fail later, inside host code, with LibTorch's words and no component named.
    const c10::Device on = adopted[i].device();
    if (device_ && (on.type() != device_->type() || (device_->has_index() && on.index() != device_->index())))
      refuse_forward("returned output '" + name + "' on " + on.str() + " while the model is on " + device_->str() +
                     ": a model's outputs stay on the device to_device gave it; move the tensor in the plugin "
                     "(one made inside forward from a host value lands on the CPU unless it is given the device)");
    result.emplace_back(std::move(name), std::move(adopted[i]));
  }
  // Before any loss, metric or writer reads an offset.
  detail::check_ragged_outputs(result, detail::batch_size_of(inputs), id(), who());
  return result;
}

bool ModelProxy::supports_activation_checkpointing() const {
  return table_.set_activation_checkpointing != nullptr;
}

std::string ModelProxy::who() const {
  return "the model component '" + id() + "' (" + library_->path().filename().string() + ", plugin ABI " +
         std::to_string(library_->abi().major) + "." + std::to_string(library_->abi().minor) + ")";
}

void ModelProxy::throw_missing_entry(const std::string& key, const std::string& feature, const char* member,
                                     std::size_t offset, const char* minor, const std::string& what_to_do) const {
  const bool predates = !detail::has_member(table_size_, offset, sizeof(void*));
  throw ConfigError(key, key + ": " + who() + " does not support " + feature + ": " +
                             (predates ? std::string("its tp.model/1 table predates plugin ABI ") + minor +
                                             ", which added " + member
                                       : std::string("its tp.model/1 table leaves ") + member + " NULL") +
                             ". " + what_to_do);
}

void ModelProxy::throw_refused(const std::string& key, const std::string& feature,
                               const std::string& what_to_do) const {
  std::string message = HostServices::take_last_error();
  if (message.empty()) message = "(the plugin gave no message)";
  throw ConfigError(key, key + ": " + who() + " refused " + feature + ": " + message + ". " + what_to_do);
}

void ModelProxy::set_activation_checkpointing(bool enabled) {
  const std::string key = "model.activation_checkpointing";
  const std::string remove = "Remove `activation_checkpointing = true` from [model] (or set it to false), or ";
  if (!supports_activation_checkpointing()) {
    if (!enabled) return; // off is what a model without the entry always is
    throw_missing_entry(key, "activation checkpointing", "set_activation_checkpointing", offsetof(tp_model_v1_t, set_activation_checkpointing),
                        "1.1",
                        remove + "use a model that declares checkpointable blocks; the plugin's author can add them "
                                 "with tp/cpp/activation_checkpoint.h (plugin_api/README.md, \"Activation "
                                 "checkpointing\").");
  }
  const tp_status status = table_.set_activation_checkpointing(self_, enabled);
  if (status == TP_ERR_UNSUPPORTED && enabled)
    throw_refused(key, "activation checkpointing", remove + "change the model's options so that it has blocks to checkpoint.");
  check(status, "set_activation_checkpointing");
}

std::vector<std::pair<std::string, uint32_t>> ModelProxy::layer_depths() const {
  const std::string key = "optim.layer_decay";
  const std::string what_to_do =
      "Remove optim.layer_decay (or set it to 1.0), or use a model that declares its layer depths (the built-in "
      "resnet and vision models do; plugin_api/README.md, \"Fine-tuning controls\").";
  if (table_.layer_depths == nullptr)
    throw_missing_entry(key, "layer-wise lr decay", "layer_depths", offsetof(tp_model_v1_t, layer_depths), "1.4", what_to_do);
  const tp_layer_depth_t* entries = nullptr;
  uint32_t count = 0;
  const tp_status status = table_.layer_depths(self_, &entries, &count);
  if (status == TP_ERR_UNSUPPORTED) throw_refused(key, "to declare layer depths", what_to_do);
  check(status, "layer_depths");
  if (count > 0 && entries == nullptr) check(TP_ERR_INTERNAL, "layer_depths", "a call that returned TP_OK with no entries");
  std::vector<std::pair<std::string, uint32_t>> out;
  std::set<std::string> seen;
  for (uint32_t i = 0; i < count; ++i) {
    if (entries[i].prefix == nullptr || entries[i].prefix[0] == '\0')
      check(TP_ERR_INTERNAL, "layer_depths", "entry " + std::to_string(i) + " with a NULL or empty prefix");
    if (!seen.insert(entries[i].prefix).second)
      check(TP_ERR_INTERNAL, "layer_depths", "the prefix '" + std::string(entries[i].prefix) + "' twice");
    out.emplace_back(entries[i].prefix, entries[i].depth);
  }
  return out;
}

void ModelProxy::set_batchnorm_frozen(bool frozen) {
  const std::string key = "model.freeze_bn_stats";
  const std::string what_to_do = "Remove `freeze_bn_stats = true` from [model] (or set it to false).";
  if (table_.set_batchnorm_frozen == nullptr) {
    if (!frozen) return;
    throw_missing_entry(key, "freezing BatchNorm statistics", "set_batchnorm_frozen", offsetof(tp_model_v1_t, set_batchnorm_frozen), "1.4",
                        what_to_do + " Models built with tp/cpp/model_adapter.h of ABI 1.4 support it.");
  }
  const tp_status status = table_.set_batchnorm_frozen(self_, frozen);
  if (status == TP_ERR_UNSUPPORTED && frozen) throw_refused(key, "to freeze BatchNorm statistics", what_to_do);
  check(status, "set_batchnorm_frozen");
}

void ModelProxy::set_batchnorm_frozen_at(const std::vector<std::string>& names, const std::string& key) {
  const std::string what_to_do = "Remove `freeze_bn_stats = true` from that parameter group, or keep the layers in "
                                 "eval mode in the model (override train()).";
  if (table_.set_batchnorm_frozen_at == nullptr)
    throw_missing_entry(key, "freezing the statistics of some BatchNorm layers", "set_batchnorm_frozen_at",
                        offsetof(tp_model_v1_t, set_batchnorm_frozen_at), "1.14",
                        what_to_do + " Models built with tp/cpp/model_adapter.h of ABI 1.14 support it.");
  std::vector<const char*> view;
  for (const std::string& name : names) view.push_back(name.c_str());
  const tp_status status = table_.set_batchnorm_frozen_at(self_, view.data(), static_cast<uint32_t>(view.size()));
  if (status == TP_ERR_UNSUPPORTED) throw_refused(key, "to freeze those BatchNorm statistics", what_to_do);
  check(status, "set_batchnorm_frozen_at");
}

std::string ModelProxy::graph_capture_blocker() {
  // NULL, or a table from before ABI 1.8 (sized_copy left the member NULL: never called past the
  // plugin's struct_size): the contract's default is "capturable".
  if (table_.check_graph_capture == nullptr) return "";
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "check_graph_capture", UINT64_MAX);  // plugin/plugin_crash.h
    status = table_.check_graph_capture(self_);
  }
  if (status == TP_OK) return "";
  if (status != TP_ERR_UNSUPPORTED) check(status, "check_graph_capture");
  // The reason is the answer, not an error: the caller decides whether it refuses the run.
  std::string reason = HostServices::take_last_error();
  return reason.empty() ? "(the plugin gave no message)" : reason;
}

bool ModelProxy::has_after_optimizer_step() const { return table_.after_optimizer_step != nullptr; }

void ModelProxy::after_optimizer_step(int64_t step, int64_t total_steps) {
  // NULL, or a table from before ABI 1.14 (sized_copy left the member NULL: never read past the
  // plugin's struct_size, PLG-2): no hook.
  if (table_.after_optimizer_step == nullptr) return;
  // The contract's state: grad mode off, so the plugin's in-place updates of lent frozen tensors
  // record no autograd history and need no guard of its own.
  const c10::NoGradGuard no_grad;
  tp_status status = TP_OK;
  {
    const PluginCallScope crash_scope(id().c_str(), "after_optimizer_step", UINT64_MAX);  // plugin/plugin_crash.h
    status = table_.after_optimizer_step(self_, step, total_steps);
  }
  check(status, "after_optimizer_step", "after optimizer step " + std::to_string(step) + " of " + std::to_string(total_steps));
}

}  // namespace tp
