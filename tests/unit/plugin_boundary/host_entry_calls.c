/* The plugin's side of host_entry_test.cpp: every function pointer the host hands to plugins,
 * called from C, as a C plugin would. Each wrapper sets *returned only after the call came back,
 * so an exception that unwound through this frame (or a crash) shows as a failed check, and a C
 * frame compiled without unwind tables would end the process in std::terminate. */
#include "host_entry_calls.h"

tp_status tp_test_call_fail(const tp_host_t *host, tp_status code, const char *message, int *returned) {
  tp_status status = host->fail(host, code, message);
  *returned = 1;
  return status;
}

void tp_test_call_log(const tp_host_t *host, int32_t severity, const char *message, int *returned) {
  host->log(host, severity, message);
  *returned = 1;
}

const void *tp_test_call_get_service(const tp_host_t *host, const tp_host_t *passed, const char *id, int *returned) {
  const void *service = host->get_service(passed, id);
  *returned = 1;
  return service;
}

void tp_test_call_tensor_release(const tp_host_t *host, tp_tensor handle, int *returned) {
  host->tensor_release(host, handle);
  *returned = 1;
}

tp_status tp_test_call_visitor(tp_state_visitor visit, void *user, const char *name, tp_tensor tensor,
                               int *returned) {
  tp_status status = visit(user, name, tensor, false);
  *returned = 1;
  return status;
}

tp_status tp_test_call_get_int(const tp_config_t *cfg, const char *key, int64_t *out_value, int *returned) {
  tp_status status = cfg->get_int(cfg->self, key, out_value);
  *returned = 1;
  return status;
}
