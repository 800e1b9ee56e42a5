// template_callback: the smallest useful Tier S plugin, to copy and edit.
//
// Component org.example.print_callback (kind callback, "tp.callback/1") logs the scalars of every
// epoch end through host->log and, when `stop_after_epochs` > 0, asks the host to stop once that
// many epochs are done. Tier S means: no LibTorch, only the stable C ABI of plugin_api/ (here
// with its header-only C++ helpers), so this library keeps loading across LibTorch upgrades.
//
// The four parts of every plugin, in order: schema, descriptor, the component's class, entry.
// The rules each part follows are the PLG-n rows of plugin_api/README.md.
#include <cstdint>
#include <cstdio>
#include <string>

#include "tp/cpp/callback_adapter.h"
#include "tp/tp.h"

namespace {

/* 1. Schema: every key of the component's TOML table, with type, default and help (PLG-6).
 *    The host validates the user's table against it and fills in defaults before create(). */
const tp_config_key_t kKeys[] = {
    {sizeof(tp_config_key_t), "stop_after_epochs", TP_CFG_INT, "0",
     "request a stop once this many epochs are done (0: never)"},
};

/* 2. Descriptor: static storage, valid until deinit(). The id is reverse-DNS and unique (PLG-5);
 *    struct_size, kind and tier are filled in (PLG-2). */
const tp_descriptor_t kDescriptor = tp::cpp::callback_descriptor(
    "org.example.print_callback", "0.1.0", "logs epoch-end scalars; optionally stops after N epochs", kKeys);

/* 3. The callback: everything the constructor reads from the config is copied into members,
 *    because the config view dies when create() returns. No global state: two instances never
 *    interfere. tp/cpp/callback_adapter.h wraps every call in TP_GUARD, so an exception becomes a
 *    status code plus a message recorded with host->fail (PLG-7), and destroy(NULL) does nothing
 *    (PLG-12). */
class PrintCallback {
 public:
  /// [main] Reads and checks the config; throwing refuses it (a negative stop_after_epochs is
  /// "print_callback: stop_after_epochs = -1 is outside [0, ...]").
  explicit PrintCallback(const tp::cpp::CallbackArgs& args)
      : host_(args.host), stop_after_epochs_(args.config.get_int_in("stop_after_epochs", 0, int64_t{1} << 40)) {}

  /// [main] Logs "epoch N: name=value ..." at each epoch end; returns TP_REQUEST_STOP when done.
  uint32_t on_event(const tp_event_t& event) {
    if (event.kind != TP_EVENT_EPOCH_END) return 0;

    // Epochs are 0-based: the end of epoch e means e + 1 epochs are done.
    const uint64_t done = event.epoch + 1;
    std::string line = "epoch " + std::to_string(done) + ":";
    for (uint32_t i = 0; i < event.scalar_count; ++i) {
      char value[32];
      std::snprintf(value, sizeof value, "%.4g", event.scalars[i].value);
      line += std::string(" ") + event.scalars[i].name + "=" + value;
    }
    log(line);

    if (stop_after_epochs_ == 0 || done < static_cast<uint64_t>(stop_after_epochs_)) return 0;
    // A request, not an action: the host finishes the step, saves, and stops every rank.
    log("print_callback: stopping after " + std::to_string(done) + " epochs");
    return TP_REQUEST_STOP;
  }

 private:
  void log(const std::string& line) const {
    if (host_ != nullptr && host_->log != nullptr) host_->log(host_, TP_LOG_INFO, line.c_str());
  }

  const tp_host_t* host_;       // borrowed until deinit()
  int64_t stop_after_epochs_;   // 0: never stop
};

}  // namespace

/* 4. Entry: TP_DEFINE_CALLBACK_PLUGIN emits the one exported symbol, tp_entry, for a library
 *    whose one component is this class (PLG-1). The name must equal the .so base name. */
TP_DEFINE_CALLBACK_PLUGIN("template_callback", PrintCallback, kDescriptor)
