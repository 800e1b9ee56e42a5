// The negotiation rule of PLG-3, tp_abi_is_compatible, as compiled by C++ and by C (plugins in
// either language call the same static inline function from version.h).
#include "tp/version.h"

#include "c_side.h"

#include <doctest/doctest.h>

namespace {

/// The rule, checked in both languages at once.
bool compatible(tp_version_t host, tp_version_t plugin) {
  const bool cxx = tp_abi_is_compatible(host, plugin);
  CHECK_MESSAGE(cxx == tp_test_c_abi_is_compatible(host, plugin), "C and C++ disagree");
  return cxx;
}

TEST_CASE("tp_abi_is_compatible: equal major, plugin minor not newer, patch ignored (PLG-3)") {
  const tp_version_t host{1, 3, 0};
  SUBCASE("equal") { CHECK(compatible(host, {1, 3, 0})); }
  SUBCASE("older plugin minor") {
    CHECK(compatible(host, {1, 2, 0}));
    CHECK(compatible(host, {1, 0, 0}));
  }
  SUBCASE("newer plugin minor") {
    CHECK_FALSE(compatible(host, {1, 4, 0}));
    CHECK_FALSE(compatible(host, {1, 99, 0}));
  }
  SUBCASE("other major") {
    CHECK_FALSE(compatible(host, {2, 3, 0}));
    CHECK_FALSE(compatible(host, {0, 3, 0}));
    CHECK_FALSE(compatible({2, 0, 0}, {1, 0, 0})); // a newer major host does not load old plugins
  }
  SUBCASE("patch is informational") {
    CHECK(compatible(host, {1, 3, 7}));
    CHECK(compatible({1, 3, 9}, {1, 3, 0}));
  }
}

TEST_CASE("ABI 1.1: this host loads plugins built for 1.0 and 1.1; a 1.0 host refuses 1.1 plugins") {
  // 1.1 appended tp_model_v1_t.set_activation_checkpointing (abi_v1_layout.h, TP_ABI_V1_GROWN).
  // When the next minor ships, add its row here rather than editing this one.
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.major == 1);
  CHECK(host.minor >= 1);
  CHECK(compatible(host, {1, 0, 0}));
  CHECK(compatible(host, {1, 1, 0}));
  CHECK_FALSE(compatible({1, 0, 0}, {1, 1, 0}));
  CHECK_FALSE(compatible(host, {1, host.minor + 1, 0}));
}

TEST_CASE("ABI 1.3: this host loads plugins built for 1.0 to 1.3; a 1.2 host refuses 1.3 plugins") {
  // 1.3 added the kind TP_KIND_BATCH_TRANSFORM and "tp.batch_transform/1" (iface/batch_transform.h).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 3);
  CHECK(compatible(host, {1, 2, 0}));
  CHECK(compatible(host, {1, 3, 0}));
  CHECK_FALSE(compatible({1, 2, 0}, {1, 3, 0}));
}

TEST_CASE("ABI 1.4: this host loads plugins built for 1.0 to 1.4; a 1.3 host refuses 1.4 plugins") {
  // 1.4 appended tp_model_v1_t.layer_depths and .set_batchnorm_frozen (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 4);
  CHECK(compatible(host, {1, 3, 0}));
  CHECK(compatible(host, {1, 4, 0}));
  CHECK_FALSE(compatible({1, 3, 0}, {1, 4, 0}));
}

TEST_CASE("ABI 1.5: this host loads plugins built for 1.0 to 1.5; a 1.4 host refuses 1.5 plugins") {
  // 1.5 appended tp_dataset_v1_t.prepare and the split "test" (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 5);
  CHECK(compatible(host, {1, 4, 0}));
  CHECK(compatible(host, {1, 5, 0}));
  CHECK_FALSE(compatible({1, 4, 0}, {1, 5, 0}));
}

TEST_CASE("ABI 1.6: this host loads plugins built for 1.0 to 1.6; a 1.5 host refuses 1.6 plugins") {
  // 1.6 appended tp_dataset_v1_t.field_batching (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 6);
  CHECK(compatible(host, {1, 5, 0}));
  CHECK(compatible(host, {1, 6, 0}));
  CHECK_FALSE(compatible({1, 5, 0}, {1, 6, 0}));
}

TEST_CASE("ABI 1.7: this host loads plugins built for 1.0 to 1.7; a 1.6 host refuses 1.7 plugins") {
  // 1.7 appended tp_metric_v1_t.visit_gathered_state (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 7);
  CHECK(compatible(host, {1, 6, 0}));
  CHECK(compatible(host, {1, 7, 0}));
  CHECK_FALSE(compatible({1, 6, 0}, {1, 7, 0}));
}

TEST_CASE("ABI 1.8: this host loads plugins built for 1.0 to 1.8; a 1.7 host refuses 1.8 plugins") {
  // 1.8 appended tp_model_v1_t.check_graph_capture (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 8);
  CHECK(compatible(host, {1, 7, 0}));
  CHECK(compatible(host, {1, 8, 0}));
  CHECK_FALSE(compatible({1, 7, 0}, {1, 8, 0}));
}

TEST_CASE("ABI 1.9: this host loads plugins built for 1.0 to 1.9; a 1.8 host refuses 1.9 plugins") {
  // 1.9 appended tp_loss_v1_t.describe (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 9);
  CHECK(compatible(host, {1, 8, 0}));
  CHECK(compatible(host, {1, 9, 0}));
  CHECK_FALSE(compatible({1, 8, 0}, {1, 9, 0}));
}

TEST_CASE("ABI 1.10: this host loads plugins built for 1.0 to 1.10; a 1.9 host refuses 1.10 plugins") {
  // 1.10 appended tp_dataset_v1_t.sample_groups (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 10);
  CHECK(compatible(host, {1, 9, 0}));
  CHECK(compatible(host, {1, 10, 0}));
  CHECK_FALSE(compatible({1, 9, 0}, {1, 10, 0}));
}

TEST_CASE("ABI 1.11: this host loads plugins built for 1.0 to 1.11; a 1.10 host refuses 1.11 plugins") {
  // 1.11 appended tp_dataset_v1_t.encoded_images and tp_worker_ctx_t.encoded_images, and added
  // tp_encoded_image_t (abi_v1_layout.h, TP_ABI_V1_GROWN).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 11);
  CHECK(compatible(host, {1, 10, 0}));
  CHECK(compatible(host, {1, 11, 0}));
  CHECK_FALSE(compatible({1, 10, 0}, {1, 11, 0}));
}

TEST_CASE("ABI 1.12: this host loads plugins built for 1.0 to 1.12; a 1.11 host refuses 1.12 plugins") {
  // 1.12 appended tp_dataset_v1_t.class_names and added tp_class_names_t (abi_v1_layout.h).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 12);
  CHECK(compatible(host, {1, 11, 0}));
  CHECK(compatible(host, {1, 12, 0}));
  CHECK_FALSE(compatible({1, 11, 0}, {1, 12, 0}));
}

TEST_CASE("ABI 1.13: this host loads plugins built for 1.0 to 1.13; a 1.12 host refuses 1.13 plugins") {
  // 1.13 appended tp_dataset_v1_t.sample_keys (abi_v1_layout.h).
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 13);
  CHECK(compatible(host, {1, 12, 0}));
  CHECK(compatible(host, {1, 13, 0}));
  CHECK_FALSE(compatible({1, 12, 0}, {1, 13, 0}));
}

TEST_CASE("ABI 1.14: this host loads plugins built for 1.0 to 1.14; a 1.13 host refuses 1.14 plugins") {
  // 1.14 appended tp_model_v1_t.after_optimizer_step and .set_batchnorm_frozen_at and added the
  // service "tp.dist/2".
  const tp_version_t host = TP_ABI_VERSION_INIT;
  CHECK(host.minor >= 14);
  CHECK(compatible(host, {1, 13, 0}));
  CHECK(compatible(host, {1, 14, 0}));
  CHECK_FALSE(compatible({1, 13, 0}, {1, 14, 0}));
}

TEST_CASE("this ABI is compatible with itself, and C and C++ agree on its version") {
  const tp_version_t cxx = TP_ABI_VERSION_INIT;
  const tp_version_t c = tp_test_c_abi_version();
  CHECK(cxx.major == c.major);
  CHECK(cxx.minor == c.minor);
  CHECK(cxx.patch == c.patch);
  CHECK(cxx.major == TP_ABI_MAJOR);
  CHECK(cxx.minor == TP_ABI_MINOR);
  CHECK(compatible(cxx, cxx));
}

}  // namespace
