/* C wrappers that call the host's function pointers from a C frame (host_entry_calls.c). */
#ifndef TP_TEST_HOST_ENTRY_CALLS_H
#define TP_TEST_HOST_ENTRY_CALLS_H

#include "tp/config.h"
#include "tp/host.h"
#include "tp/iface/tensor.h"

TP_EXTERN_C_BEGIN

tp_status tp_test_call_fail(const tp_host_t *host, tp_status code, const char *message, int *returned);
void tp_test_call_log(const tp_host_t *host, int32_t severity, const char *message, int *returned);
/* Calls host->get_service with `passed` as its host argument (NULL to test that case). */
const void *tp_test_call_get_service(const tp_host_t *host, const tp_host_t *passed, const char *id, int *returned);
void tp_test_call_tensor_release(const tp_host_t *host, tp_tensor handle, int *returned);
tp_status tp_test_call_visitor(tp_state_visitor visit, void *user, const char *name, tp_tensor tensor,
                               int *returned);
tp_status tp_test_call_get_int(const tp_config_t *cfg, const char *key, int64_t *out_value, int *returned);

TP_EXTERN_C_END

#endif /* TP_TEST_HOST_ENTRY_CALLS_H */
