// The released ABI 1 layout, checked by the C++ compiler (c_layout_check.c checks it in C), and
// PLG-2's promise that every extensible struct starts with its uint32_t struct_size.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include "tp/iface/batch_transform.h"
#include "tp/iface/loss.h"
#include "tp/iface/metric.h"
#include "tp/iface/model.h"
#include "tp/tp.h"

#include "abi_v1_layout.h"

#include <doctest/doctest.h>

#if defined(__x86_64__)
#define TP_CXX_CHECK_SIZE(T, size, align) \
  static_assert(sizeof(T) == (size) && alignof(T) == (align), "sizeof/alignof of " #T " changed; ABI 1 broken");
#define TP_CXX_CHECK_OFFSET(T, member, offset) \
  static_assert(offsetof(T, member) == (offset), "offset of " #T "." #member " changed; ABI 1 broken");
TP_ABI_V1_SIZES(TP_CXX_CHECK_SIZE)
TP_ABI_V1_OFFSETS(TP_CXX_CHECK_OFFSET)
// A struct that grew: the first appended member starts where the older minor's struct ended, so
// a producer of that minor (struct_size = the old size) leaves it out entirely.
#define TP_CXX_CHECK_GROWN(T, minor, size, first_new) \
  static_assert(offsetof(T, first_new) == (size) && sizeof(T) > (size), #T " did not grow at its end");
TP_ABI_V1_GROWN(TP_CXX_CHECK_GROWN)
#endif
#define TP_CXX_CHECK_GROWN_MINOR(T, minor, size, first_new) \
  static_assert((minor) < TP_ABI_MINOR, #T ": a grown struct needs a newer TP_ABI_MINOR");
TP_ABI_V1_GROWN(TP_CXX_CHECK_GROWN_MINOR)

#define TP_CXX_CHECK_CONSTANT(name, value) static_assert((name) == (value), #name " renumbered; ABI 1 broken");
TP_ABI_V1_CONSTANTS(TP_CXX_CHECK_CONSTANT)

namespace {

// Plain data on both sides: the host copies these with memcpy (sized_copy) and plugins define them
// with aggregate initialisers.
#define TP_CXX_CHECK_PLAIN(T, size, align) \
  static_assert(std::is_standard_layout_v<T> && std::is_trivially_copyable_v<T>, #T " is not plain C data");
TP_ABI_V1_SIZES(TP_CXX_CHECK_PLAIN)

/// PLG-2 for one struct: struct_size is a uint32_t at offset 0, so a reader that knows nothing of
/// the struct's version can read it, and a producer that sets it to sizeof is read back exactly.
template <typename T>
void check_struct_size_first(const char* name) {
  CAPTURE(name);
  static_assert(std::is_same_v<decltype(T::struct_size), uint32_t>);
  CHECK(offsetof(T, struct_size) == 0);
  T value{};
  value.struct_size = sizeof(T);
  uint32_t first = 0;
  std::memcpy(&first, &value, sizeof first);
  CHECK(first == sizeof(T));
}

TEST_CASE("struct_size is the first member of every extensible ABI struct (PLG-2)") {
#define TP_CHECK_FIRST(T) check_struct_size_first<T>(#T)
  TP_CHECK_FIRST(tp_host_t);
  TP_CHECK_FIRST(tp_dist_v1_t);
  TP_CHECK_FIRST(tp_dist_v2_t);
  TP_CHECK_FIRST(tp_config_key_t);
  TP_CHECK_FIRST(tp_config_t);
  TP_CHECK_FIRST(tp_build_info_t);
  TP_CHECK_FIRST(tp_example_input_t);
  TP_CHECK_FIRST(tp_descriptor_t);
  TP_CHECK_FIRST(tp_plugin_entry_t);
  TP_CHECK_FIRST(tp_worker_ctx_t);
  TP_CHECK_FIRST(tp_dataset_v1_t);
  TP_CHECK_FIRST(tp_field_batching_t);
  TP_CHECK_FIRST(tp_encoded_image_t);
  TP_CHECK_FIRST(tp_event_t);
  TP_CHECK_FIRST(tp_callback_v1_t);
  TP_CHECK_FIRST(tp_model_v1_t);
  TP_CHECK_FIRST(tp_loss_v1_t);
  TP_CHECK_FIRST(tp_field_contract_t);
  TP_CHECK_FIRST(tp_loss_description_t);
  TP_CHECK_FIRST(tp_metric_v1_t);
  TP_CHECK_FIRST(tp_batch_transform_v1_t);
#undef TP_CHECK_FIRST
  // Without struct_size, and therefore frozen for all of ABI 1: tp_version_t (passed by value)
  // and the array elements tp_field_t, tp_scalar_t and tp_named_tensor_t, which the caller
  // allocates at its own sizeof. Their sizes are pinned above.
}

TEST_CASE("a table written by an older minor reads its appended members as absent (PLG-2, ARCH-5)") {
  // What a host does with a 1.0 plugin's model table: copy min(struct_size, sizeof) into a zeroed
  // table. The 1.0 plugin's memory after its table is someone else's; here it is a non-NULL
  // pointer that must not leak into the copy.
  struct {
    tp_model_v1_t table;
    unsigned char after[8];
  } producer{};
  std::memset(static_cast<void*>(&producer), 0xAB, sizeof producer);
  producer.table.struct_size = static_cast<uint32_t>(offsetof(tp_model_v1_t, set_activation_checkpointing));
  tp_model_v1_t reader{};
  std::memcpy(&reader, &producer.table, std::min<std::size_t>(producer.table.struct_size, sizeof reader));
  CHECK(reader.struct_size == offsetof(tp_model_v1_t, set_activation_checkpointing));
  CHECK((reader.forward != nullptr)); // doctest cannot print function pointers
  CHECK((reader.set_activation_checkpointing == nullptr));
  CHECK((reader.check_graph_capture == nullptr));

  // The same for a 1.7 plugin, whose table ends just before check_graph_capture (1.8): the
  // members it wrote survive, the one it never knew reads as NULL, so the host treats the model
  // as capturable without calling past its struct.
  std::memset(static_cast<void*>(&producer), 0xAB, sizeof producer);
  producer.table.struct_size = static_cast<uint32_t>(offsetof(tp_model_v1_t, check_graph_capture));
  tp_model_v1_t reader17{};
  std::memcpy(&reader17, &producer.table, std::min<std::size_t>(producer.table.struct_size, sizeof reader17));
  CHECK((reader17.set_batchnorm_frozen != nullptr));
  CHECK((reader17.check_graph_capture == nullptr));
}

TEST_CASE("a C++ table initialised positionally leaves members appended later NULL, without a warning") {
  // The 1.0 form of every C++ plugin's table (plugins/template/tier_t_model). The default member
  // initializer in model.h keeps this free of -Wmissing-field-initializers under -Werror (this
  // file is compiled with -Wall -Wextra).
  constexpr tp_model_v1_t table = {sizeof(tp_model_v1_t), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  static_assert(table.set_activation_checkpointing == nullptr);
  static_assert(table.check_graph_capture == nullptr);
  CHECK(table.struct_size == sizeof(tp_model_v1_t));
}

TEST_CASE("ABI 1.11: a context or a dataset table written for an older minor asks for pixels (PLG-2)") {
  // The 1.0-1.10 form of a host's worker context and of a C++ dataset table: positional, without
  // the appended member. The default member initializers in dataset.h keep both free of
  // -Wmissing-field-initializers and leave encoded_images 0 (pixels) and NULL (nothing declared).
  constexpr tp_worker_ctx_t ctx = {sizeof(tp_worker_ctx_t), 0, 1, 0, 0, 7};
  static_assert(ctx.encoded_images == 0);
  constexpr tp_dataset_v1_t table = {sizeof(tp_dataset_v1_t), nullptr, nullptr, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, nullptr};
  static_assert(table.encoded_images == nullptr);
  // A 1.10 host's context ends right before encoded_images: a plugin that checks struct_size
  // (the C++ adapter's WorkerContext::encoded_images) never reads the bytes after it.
  CHECK(offsetof(tp_worker_ctx_t, encoded_images) == 32);
  CHECK(offsetof(tp_worker_ctx_t, encoded_images) + sizeof(uint32_t) <= sizeof(tp_worker_ctx_t));
}

TEST_CASE("the layout table pins every struct the ABI headers define") {
  // A struct added to a header without a row in abi_v1_layout.h would ship unpinned.
  // TP_ABI_HEADER_STRUCTS lists every `typedef struct tp_..._t {` in tp/*.h and tp/iface/*.h,
  // collected by CMake at configure time.
  std::set<std::string> pinned;
#define TP_ADD_ROW(T, size, align) pinned.insert(#T);
  TP_ABI_V1_SIZES(TP_ADD_ROW)
#undef TP_ADD_ROW
  std::set<std::string> declared;
  std::istringstream names(TP_ABI_HEADER_STRUCTS);
  for (std::string name; names >> name;) declared.insert(name);
  REQUIRE_FALSE(declared.empty());
  for (const std::string& name : declared) CHECK_MESSAGE(pinned.count(name) == 1, name << " has no row in abi_v1_layout.h");
  for (const std::string& name : pinned) CHECK_MESSAGE(declared.count(name) == 1, name << " is pinned but not declared");
}

TEST_CASE("interface and service ids are the released strings") {
  // Lookups are by string (ARCH-5); a renamed id is a missing interface for every old plugin.
  CHECK(std::strcmp(TP_IFACE_DATASET_V1, "tp.dataset/1") == 0);
  CHECK(std::strcmp(TP_IFACE_CALLBACK_V1, "tp.callback/1") == 0);
  CHECK(std::strcmp(TP_IFACE_MODEL_V1, "tp.model/1") == 0);
  CHECK(std::strcmp(TP_IFACE_LOSS_V1, "tp.loss/1") == 0);
  CHECK(std::strcmp(TP_IFACE_METRIC_V1, "tp.metric/1") == 0);
  CHECK(std::strcmp(TP_IFACE_BATCH_TRANSFORM_V1, "tp.batch_transform/1") == 0);
  CHECK(std::strcmp(TP_SERVICE_DIST_V1, "tp.dist/1") == 0);
  CHECK(std::strcmp(TP_SERVICE_DIST_V2, "tp.dist/2") == 0);
  CHECK(std::strcmp(TP_ENTRY_SYMBOL, "tp_entry") == 0);
}

}  // namespace
