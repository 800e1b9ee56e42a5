#include "tp/framework/plugin/host_services.h"

#include <ATen/core/Tensor.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "plugin/dist_service.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/plugin/plugin_crash.h"
#include "tp/framework/util/abi_guard.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/log.h"
#include "tp/status.h"

namespace tp {
namespace {

// fail() stores the message per thread (PLG-7): plugins call it from loader workers and the
// main thread at once. One string per thread, reused, so no allocation churn.
thread_local std::string t_last_error;

// The lines of a plugin's message, each with its control characters escaped (ESC, BEL, CR, DEL,
// C1: a raw ESC recolours or retitles the user's terminal). "\r\n" counts as one line break and a
// final one ends the message rather than adding an empty line.
std::vector<std::string> plugin_lines(const char* message) {
  std::string_view text = message != nullptr ? message : "";
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  std::vector<std::string> lines;
  for (;;) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(escape_control_characters(line));
    if (end == std::string_view::npos) return lines;
    text.remove_prefix(end + 1);
  }
}

// Every entry below runs in a plugin frame: noexcept, with its body in one guard (util/abi_guard.h).

tp_status host_fail(const tp_host_t*, tp_status code, const char* message) noexcept {
  // Copying the message can only fail for memory; the plugin then still gets its code back and
  // the host reports the bare code.
  const tp_status status = detail::guard_status(
      [&] {
        // The message becomes part of a host error paragraph: a later line is indented, so it
        // cannot start a line that reads as one of the host's own (a timestamp, "host: error:").
        const std::vector<std::string> lines = plugin_lines(message);
        std::string joined = lines.front();
        for (std::size_t k = 1; k < lines.size(); ++k) joined += "\n  " + lines[k];
        t_last_error = std::move(joined);
        return TP_OK;
      },
      [](const char*) {});
  if (status != TP_OK) t_last_error.clear();
  return code;
}

void host_log(const tp_host_t* host, int32_t severity, const char* message) noexcept {
  if (host == nullptr || host->host_data == nullptr) return;
  detail::guard_void("host->log", [&] {
    const auto* self = static_cast<const HostServices*>(host->host_data);
    LogLevel level = LogLevel::Info;
    if (severity <= TP_LOG_DEBUG) level = LogLevel::Debug;
    else if (severity == TP_LOG_WARNING) level = LogLevel::Warning;
    else if (severity >= TP_LOG_ERROR) level = LogLevel::Error;
    // Every plugin shares this table, so the caller is the plugin whose call runs on this thread
    // (the crash handler's slot): a line from the plugin's own thread stays "[plugin]". A library
    // named by its file (dlopen, init, deinit) is named by its file name alone.
    std::string source = "plugin";
    if (const char* caller = current_plugin_call(); caller != nullptr) {
      const std::string_view name(caller);
      source += " " + std::string(name.substr(name.rfind('/') == std::string_view::npos ? 0 : name.rfind('/') + 1));
    }
    // One call is one plugin message: every line of it carries the tag, so a line break in it
    // cannot start an untagged line that reads as the host's (plugin trial F12). Tagging rather
    // than escaping "\n" keeps a multi-line message (a table, a list) readable as written.
    for (const std::string& line : plugin_lines(message)) self->logger().write(level, source, line);
  });
}

const void* host_get_service(const tp_host_t* host, const char* id) noexcept {
  if (host == nullptr || host->host_data == nullptr || id == nullptr) return nullptr;
  const auto* self = static_cast<const HostServices*>(host->host_data);
  if (std::strcmp(id, TP_SERVICE_DIST_V1) == 0) return self->dist_service();
  if (std::strcmp(id, TP_SERVICE_DIST_V2) != 0) return nullptr;
  // A plugin that asks may gather in its training forwards: on_oom's one-rank split must not run.
  if (DistContext* group = self->process_group()) group->note_plugin_collectives();
  return self->dist2_service();
}

void host_tensor_release(const tp_host_t*, tp_tensor handle) noexcept {
  // Handles are heap at::Tensor objects; host and plugin share libstdc++ and LibTorch (the
  // fingerprint check guarantees it), so deleting here is the matching release. Releasing the
  // last reference runs TensorImpl's destructor, which does not throw.
  delete reinterpret_cast<at::Tensor*>(handle);
}

}  // namespace

HostServices::HostServices(Logger& logger, ProcessPlace place) : logger_(logger) {
  dist_.struct_size = sizeof(tp_dist_v1_t);
  dist_.rank = place.rank;
  dist_.world_size = place.world_size;
  dist_.local_rank = place.local_rank;
  dist_.local_world_size = place.local_world_size;
  dist2_ = dist_v2_table(dist_);

  host_.struct_size = sizeof(tp_host_t);
  host_.abi = TP_ABI_VERSION_INIT;
  host_.host_data = this;
  host_.fail = &host_fail;
  host_.log = &host_log;
  host_.get_service = &host_get_service;
  host_.tensor_release = &host_tensor_release;
}

HostServices::~HostServices() = default;

void HostServices::attach_process_group(DistContext& dist) {
  plugin_collectives_ = data_parallel_collectives(dist);
  process_group_ = &dist;
}

std::string HostServices::take_last_error() {
  std::string message;
  message.swap(t_last_error);
  return message;
}

void HostServices::set_last_error(std::string message) noexcept { t_last_error = std::move(message); }

const char* status_name(tp_status status) {
  switch (status) {
    case TP_OK: return "TP_OK";
    case TP_ERR_INVALID_ARGUMENT: return "TP_ERR_INVALID_ARGUMENT";
    case TP_ERR_CONFIG: return "TP_ERR_CONFIG";
    case TP_ERR_UNSUPPORTED: return "TP_ERR_UNSUPPORTED";
    case TP_ERR_IO: return "TP_ERR_IO";
    case TP_ERR_OUT_OF_MEMORY: return "TP_ERR_OUT_OF_MEMORY";
    case TP_ERR_DEVICE: return "TP_ERR_DEVICE";
    case TP_ERR_INTERNAL: return "TP_ERR_INTERNAL";
    case TP_ERR_OUT_OF_RANGE: return "TP_ERR_OUT_OF_RANGE";
    default: return "unknown status";
  }
}

}  // namespace tp
