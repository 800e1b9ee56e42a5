#include "interface_check.h"
#include "sized_copy.h"

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "tp/framework/error.h"
#include "tp/iface/batch_transform.h"
#include "tp/iface/callback.h"
#include "tp/iface/dataset.h"
#include "tp/iface/loss.h"
#include "tp/iface/metric.h"
#include "tp/iface/model.h"

namespace tp {
namespace {

using Required = std::initializer_list<std::pair<const char*, bool>>;

// `min_size` is the size of the ABI 1.0 table up to its last required member. Tables of any later
// minor are larger and pass; members appended after 1.0 are optional (ARCH-5), so they are not in
// `required`, and proxies read them through sized_copy, which leaves those a 1.0 plugin lacks
// NULL (tp_model_v1_t: 56 bytes in 1.0, 64 since 1.1 with set_activation_checkpointing, 80 since
// 1.4 with layer_depths and set_batchnorm_frozen, 88 since 1.8 with check_graph_capture, 104 since
// 1.14 with after_optimizer_step and set_batchnorm_frozen_at).
void check(const ComponentInfo& info, const std::string& file, std::size_t min_size, Required required) {
  const std::string where = file + ": component '" + info.id + "' (" + kind_name(info.kind) + ")";
  const uint32_t size = *static_cast<const uint32_t*>(info.interface_table);
  if (size < min_size)
    throw PluginLoadError(where + ": interface table struct_size " + std::to_string(size) +
                          " is smaller than the ABI 1 table (" + std::to_string(min_size) +
                          "); set struct_size = sizeof(the table).");
  for (const auto& [name, present] : required)
    if (!present) throw PluginLoadError(where + ": required function `" + std::string(name) + "` is NULL.");
}

}  // namespace

void check_interface_table(const ComponentInfo& info, const std::string& file) {
  if (info.interface_table == nullptr)
    throw PluginLoadError(file + ": component '" + info.id + "' declares kind " + kind_name(info.kind) +
                          " but get_interface(id, \"" + interface_id_for_kind(info.kind) + "\") returned NULL.");
  switch (info.kind) {
    case TP_KIND_DATASET: {
      const auto t = detail::sized_copy<tp_dataset_v1_t>(info.interface_table);
      check(info, file, offsetof(tp_dataset_v1_t, set_epoch),
            {{"create", t.create}, {"destroy", t.destroy}, {"size", t.size}, {"get_sample", t.get_sample}});
      break;
    }
    case TP_KIND_CALLBACK: {
      const auto t = detail::sized_copy<tp_callback_v1_t>(info.interface_table);
      check(info, file, offsetof(tp_callback_v1_t, on_event) + sizeof(void*),
            {{"create", t.create}, {"destroy", t.destroy}, {"on_event", t.on_event}});
      break;
    }
    case TP_KIND_MODEL: {
      const auto t = detail::sized_copy<tp_model_v1_t>(info.interface_table);
      // set_activation_checkpointing (@since 1.1), layer_depths and set_batchnorm_frozen (@since
      // 1.4) are optional: ModelProxy reports an absent one only when the config asks for it.
      // check_graph_capture (@since 1.8) is optional too: absent means capturable; so is
      // after_optimizer_step (@since 1.14): absent means no per-step hook; and
      // set_batchnorm_frozen_at (@since 1.14), asked for only by a freeze_bn_stats rule.
      check(info, file, offsetof(tp_model_v1_t, forward) + sizeof(void*),
            {{"create", t.create}, {"destroy", t.destroy}, {"to_device", t.to_device},
             {"set_training", t.set_training}, {"visit_state", t.visit_state}, {"forward", t.forward}});
      break;
    }
    case TP_KIND_LOSS: {
      const auto t = detail::sized_copy<tp_loss_v1_t>(info.interface_table);
      check(info, file, offsetof(tp_loss_v1_t, forward) + sizeof(void*), {{"create", t.create}, {"destroy", t.destroy}, {"forward", t.forward}});
      break;
    }
    case TP_KIND_METRIC: {
      const auto t = detail::sized_copy<tp_metric_v1_t>(info.interface_table);
      check(info, file, offsetof(tp_metric_v1_t, compute) + sizeof(void*),
            {{"create", t.create}, {"destroy", t.destroy}, {"to_device", t.to_device}, {"reset", t.reset},
             {"update", t.update}, {"visit_state", t.visit_state}, {"compute", t.compute}});
      break;
    }
    case TP_KIND_BATCH_TRANSFORM: {
      const auto t = detail::sized_copy<tp_batch_transform_v1_t>(info.interface_table);
      check(info, file, offsetof(tp_batch_transform_v1_t, apply) + sizeof(void*),
            {{"create", t.create}, {"destroy", t.destroy}, {"apply", t.apply}});
      break;
    }
    default:
      break;
  }
}

}  // namespace tp
