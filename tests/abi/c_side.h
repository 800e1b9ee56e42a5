/* Functions compiled as C11 (c_layout_check.c) that the C++ tests call, so the tests see what a
 * plugin written in C sees. */
#ifndef TP_TESTS_ABI_C_SIDE_H
#define TP_TESTS_ABI_C_SIDE_H

#include <stdbool.h>

#include "tp/version.h"

TP_EXTERN_C_BEGIN

/** tp_abi_is_compatible as compiled by the C compiler. */
bool tp_test_c_abi_is_compatible(tp_version_t host, tp_version_t plugin);

/** TP_ABI_VERSION_INIT as the C compiler expands it. */
tp_version_t tp_test_c_abi_version(void);

TP_EXTERN_C_END

#endif /* TP_TESTS_ABI_C_SIDE_H */
