// template_callback: the smallest useful Tier S plugin, to copy and edit.
//
// Component org.example.print_callback (kind callback, "tp.callback/1") logs the scalars of every
// epoch end through host->log and, when `stop_after_epochs` > 0, asks the host to stop once that
// many epochs are done. Tier S means: no LibTorch, only the stable C ABI of plugin_api/ (here
// with its header-only C++ helpers), so this library keeps loading across LibTorch upgrades.
//
// The five parts of every plugin, in order: schema, descriptor, instance, interface functions,
// entry. The rules each part follows are the PLG-n rows of plugin_api/README.md.
#include <cstdio>
#include <string>

#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/tp.h"

namespace {

using tp::cpp::Failure;

/* 1. Schema: every key of the component's TOML table, with type, default and help (PLG-6).
 *    The host validates the user's table against it and fills in defaults before create(). */
const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "stop_after_epochs", TP_CFG_INT, "0",
     "request a stop once this many epochs are done (0: never)"},
};

/* 2. Descriptor: static storage, valid until deinit(). The id is reverse-DNS and unique (PLG-5). */
const tp_descriptor_t kDescriptor = {
    sizeof(tp_descriptor_t), // struct_size first, set to sizeof (PLG-2)
    "org.example.print_callback",
    TP_KIND_CALLBACK,
    TP_TIER_S,
    "0.1.0",
    "logs epoch-end scalars; optionally stops after N epochs",
    kKeys,
    static_cast<uint32_t>(sizeof(kKeys) / sizeof(kKeys[0])),
    nullptr, // examples: models only
    0,
    0, // flags
};

/* 3. Instance: everything create() reads from the config is copied here, because the config
 *    view dies when create() returns. No global state: two instances never interfere. */
struct PrintCallback {
  const tp_host_t* host;     // borrowed until deinit()
  int64_t stop_after_epochs; // 0: never stop
};

/* 4. Interface functions. Every one is wrapped in TP_GUARD, so no exception crosses the C ABI;
 *    a failure becomes a status code plus a message recorded with host->fail (PLG-7). */

/// [main] Reads and checks the config; *out_self is released with print_destroy.
tp_status print_create(const tp_host_t* host, const tp_config_t* cfg, void** out_self) {
  TP_GUARD(host, {
    if (out_self == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, "print_callback: out_self is NULL");
    const tp::cpp::ConfigReader config(cfg);
    const int64_t stop_after = config.get_int("stop_after_epochs");
    if (stop_after < 0)
      throw Failure(TP_ERR_CONFIG,
                    "print_callback: stop_after_epochs must be >= 0, got " + std::to_string(stop_after));
    *out_self = new PrintCallback{host, stop_after};
    return TP_OK;
  });
}

/// [main] Accepts NULL (PLG-12): deleting a null pointer is a no-op.
void print_destroy(void* self) { delete static_cast<PrintCallback*>(self); }

/// [main] Logs "epoch N: name=value ..." at each epoch end; sets TP_REQUEST_STOP when done.
tp_status print_on_event(void* self, const tp_event_t* event, uint32_t* out_requests) {
  auto* cb = static_cast<PrintCallback*>(self);
  TP_GUARD(cb != nullptr ? cb->host : tp::cpp::plugin_host(), {
    if (cb == nullptr || event == nullptr || out_requests == nullptr)
      throw Failure(TP_ERR_INVALID_ARGUMENT, "print_callback: on_event needs self, event and out_requests");
    if (event->kind != TP_EVENT_EPOCH_END) return TP_OK;

    // Epochs are 0-based: the end of epoch e means e + 1 epochs are done.
    const uint64_t done = event->epoch + 1;
    std::string line = "epoch " + std::to_string(done) + ":";
    for (uint32_t i = 0; i < event->scalar_count; ++i) {
      char value[32];
      std::snprintf(value, sizeof value, "%.4g", event->scalars[i].value);
      line += std::string(" ") + event->scalars[i].name + "=" + value;
    }
    cb->host->log(cb->host, TP_LOG_INFO, line.c_str());

    if (cb->stop_after_epochs > 0 && done >= static_cast<uint64_t>(cb->stop_after_epochs)) {
      // A request, not an action: the host finishes the step, saves, and stops every rank.
      *out_requests |= TP_REQUEST_STOP;
      const std::string note = "print_callback: stopping after " + std::to_string(done) + " epochs";
      cb->host->log(cb->host, TP_LOG_INFO, note.c_str());
    }
    return TP_OK;
  });
}

const tp_callback_v1_t kCallbackTable = {
    sizeof(tp_callback_v1_t), &print_create, &print_destroy, &print_on_event,
};

/* 5. Entry: the library's components; TP_DEFINE_PLUGIN emits the one exported symbol, tp_entry
 *    (PLG-1). The name must equal the .so base name. */
const tp::cpp::Component kComponents[] = {
    {&kDescriptor, TP_IFACE_CALLBACK_V1, &kCallbackTable},
};

}  // namespace

TP_DEFINE_PLUGIN("template_callback", TP_STABLE_BUILD_INFO_INIT, kComponents)
