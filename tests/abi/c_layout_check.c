/* The C11 compiler's check of the released ABI 1 layout (abi_v1_layout.h). Plugins are written
 * in C as well as C++, so a header detail that lays a struct out differently in C (bool, enum or
 * padding rules) would break C plugins while every C++ test passed; layout_test.cpp checks the
 * same table in C++. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp/iface/batch_transform.h"
#include "tp/iface/loss.h"
#include "tp/iface/metric.h"
#include "tp/iface/model.h"
#include "tp/tp.h"

#include "abi_v1_layout.h"
#include "c_side.h"

#if defined(__x86_64__)
#define TP_C_CHECK_SIZE(T, size, align) \
  _Static_assert(sizeof(T) == (size) && _Alignof(T) == (align), "C: sizeof/alignof of " #T " changed; ABI 1 broken");
#define TP_C_CHECK_OFFSET(T, member, offset) \
  _Static_assert(offsetof(T, member) == (offset), "C: offset of " #T "." #member " changed; ABI 1 broken");
TP_ABI_V1_SIZES(TP_C_CHECK_SIZE)
TP_ABI_V1_OFFSETS(TP_C_CHECK_OFFSET)
TP_ABI_V1_DLPACK_SIZES(TP_C_CHECK_SIZE)
TP_ABI_V1_DLPACK_OFFSETS(TP_C_CHECK_OFFSET)
#define TP_C_CHECK_GROWN(T, minor, size, first_new) \
  _Static_assert(offsetof(T, first_new) == (size) && sizeof(T) > (size), "C: " #T " did not grow at its end");
TP_ABI_V1_GROWN(TP_C_CHECK_GROWN)
#endif

#define TP_C_CHECK_CONSTANT(name, value) _Static_assert((name) == (value), "C: " #name " renumbered; ABI 1 broken");
TP_ABI_V1_CONSTANTS(TP_C_CHECK_CONSTANT)
TP_ABI_V1_DLPACK_CONSTANTS(TP_C_CHECK_CONSTANT)

bool tp_test_c_abi_is_compatible(tp_version_t host, tp_version_t plugin) {
  return tp_abi_is_compatible(host, plugin);
}

tp_version_t tp_test_c_abi_version(void) {
  const tp_version_t version = TP_ABI_VERSION_INIT;
  return version;
}
