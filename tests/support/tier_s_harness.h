// Test harness for Tier S plugins: opens a built plugin library with dlopen, initialises it with
// a FakeHost, and drives its datasets through the C ABI only (no framework code). Samples are
// RAII objects that run every field's deleter exactly once; DeleterSpy counts those calls.
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "support/fake_host.h"
#include "tp/tp.h"
#include "support/test_paths.h"

namespace tp::test {

/// Counts calls of plugin deleters. adopt() swaps a tensor's deleter for a counting one that
/// then calls the plugin's original, so calls() is the number of plugin deleters that really ran.
class DeleterSpy {
 public:
  using Deleter = void (*)(DLManagedTensor*);
  static void adopt(DLManagedTensor* t) {
    std::lock_guard lock(mutex());
    originals().emplace(t, t->deleter);
    t->deleter = &counting_deleter;
    ++adopted_counter();
  }
  static size_t calls() { return calls_counter().load(); }
  static size_t adopted() { return adopted_counter().load(); }
  /// Tensors adopted whose deleter has not run yet.
  static size_t pending() {
    std::lock_guard lock(mutex());
    return originals().size();
  }

 private:
  static void counting_deleter(DLManagedTensor* t) {
    Deleter original = nullptr;
    {
      std::lock_guard lock(mutex());
      auto it = originals().find(t);
      if (it == originals().end()) return; // a second call: not counted, and never forwarded
      original = it->second;
      originals().erase(it);
    }
    ++calls_counter();
    original(t);
  }
  static std::mutex& mutex() { static std::mutex m; return m; }
  static std::unordered_map<DLManagedTensor*, Deleter>& originals() {
    static std::unordered_map<DLManagedTensor*, Deleter> m;
    return m;
  }
  static std::atomic<size_t>& calls_counter() { static std::atomic<size_t> n{0}; return n; }
  static std::atomic<size_t>& adopted_counter() { static std::atomic<size_t> n{0}; return n; }
};

/// The fields of one sample; owns their tensors and runs each deleter once on destruction.
class Sample {
 public:
  Sample() = default;
  Sample(Sample&& other) noexcept : fields_(std::exchange(other.fields_, {})) {}
  Sample& operator=(Sample&& other) noexcept {
    if (this != &other) { release(); fields_ = std::exchange(other.fields_, {}); }
    return *this;
  }
  ~Sample() { release(); }

  /// Takes ownership of `count` fields just returned by get_sample.
  void adopt(const tp_field_t* fields, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      DeleterSpy::adopt(fields[i].tensor);
      fields_.push_back(fields[i]);
    }
  }
  const std::vector<tp_field_t>& fields() const { return fields_; }
  /// The tensor of field `name`; fails the test when absent.
  const DLTensor& tensor(const char* name) const {
    for (const tp_field_t& f : fields_)
      if (std::strcmp(f.name, name) == 0) return f.tensor->dl_tensor;
    FAIL("no field named " << name);
    return fields_.front().tensor->dl_tensor; // unreachable: FAIL throws
  }
  std::vector<int64_t> shape(const char* name) const {
    const DLTensor& t = tensor(name);
    return {t.shape, t.shape + t.ndim};
  }
  /// The elements of a compact field, as T (the caller checked the dtype).
  template <typename T>
  std::span<const T> values(const char* name) const {
    const DLTensor& t = tensor(name);
    int64_t n = 1;
    for (int32_t d = 0; d < t.ndim; ++d) n *= t.shape[d];
    return {reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset),
            static_cast<size_t>(n)};
  }
  /// All bytes of all fields, in order: equal samples have equal bytes.
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    for (const tp_field_t& f : fields_) {
      const DLTensor& t = f.tensor->dl_tensor;
      int64_t n = t.dtype.bits / 8 * t.dtype.lanes;
      for (int32_t d = 0; d < t.ndim; ++d) n *= t.shape[d];
      const auto* p = static_cast<const uint8_t*>(t.data) + t.byte_offset;
      out.insert(out.end(), p, p + n);
    }
    return out;
  }

 private:
  void release() {
    for (tp_field_t& f : fields_) f.tensor->deleter(f.tensor);
    fields_.clear();
  }
  std::vector<tp_field_t> fields_;
};

/// Fills `cfg` with the defaults declared in `d`'s schema, parsed as their declared type, as
/// the host does before create() (so this also checks that every default parses, PLG-6).
inline void apply_schema_defaults(const tp_descriptor_t& d, FakeConfig& cfg) {
  for (uint32_t i = 0; i < d.key_count; ++i) {
    const tp_config_key_t& k = d.keys[i];
    REQUIRE(k.default_value != nullptr);
    const std::string text = k.default_value;
    char* end = nullptr;
    if (k.type == TP_CFG_INT) {
      const long long v = std::strtoll(text.c_str(), &end, 10);
      REQUIRE_MESSAGE(*end == '\0', k.name << ": default " << text << " is not an integer");
      cfg.values[k.name] = int64_t{v};
    } else if (k.type == TP_CFG_FLOAT) {
      const double v = std::strtod(text.c_str(), &end);
      REQUIRE_MESSAGE(*end == '\0', k.name << ": default " << text << " is not a float");
      cfg.values[k.name] = v;
    } else if (k.type == TP_CFG_BOOL) {
      REQUIRE_MESSAGE((text == "true" || text == "false"),
                      k.name << ": default " << text << " is not a bool");
      cfg.values[k.name] = text == "true";
    } else if (k.type == TP_CFG_STRING) {
      REQUIRE_MESSAGE((text.size() >= 2 && text.front() == '"' && text.back() == '"'),
                      k.name << ": default " << text << " is not a quoted string");
      cfg.values[k.name] = text.substr(1, text.size() - 2);  // our defaults have no escapes
    } else {
      FAIL(k.name << ": key type " << k.type << " not handled by this harness");
    }
  }
}

/// A worker context as the host would pass it.
inline tp_worker_ctx_t worker_ctx(uint64_t seed, uint32_t worker = 0) {
  return tp_worker_ctx_t{sizeof(tp_worker_ctx_t), worker, 4, /*rank=*/0, /*epoch=*/0, seed};
}

/// A built plugin library: dlopen, resolve tp_entry, negotiate, init(host); deinit and dlclose
/// on destruction (after every dataset of it is destroyed and every sample released).
class PluginLibrary {
 public:
  explicit PluginLibrary(const std::string& name) {
    // Built-ins live in the plugin dir; test fixtures (c_dataset) in the fixtures' plugin dir.
    std::string path = std::string(tp::test::plugin_dir()) + "/" + name + ".so";
    if (!std::filesystem::exists(path)) path = std::string(tp::test::fixture_plugin_dir()) + "/" + name + ".so";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(handle_ != nullptr, "dlopen " << path << ": " << dlerror());
    entry_ = static_cast<const tp_plugin_entry_t*>(dlsym(handle_, TP_ENTRY_SYMBOL));
    REQUIRE_MESSAGE(entry_ != nullptr, path << " exports no " << TP_ENTRY_SYMBOL);
    REQUIRE(tp_abi_is_compatible(host.host.abi, entry_->abi));
    REQUIRE(entry_->init(&host.host) == TP_OK);
  }
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;
  ~PluginLibrary() {
    if (entry_ != nullptr && entry_->deinit != nullptr) entry_->deinit();
    if (handle_ != nullptr) dlclose(handle_);
  }

  const tp_plugin_entry_t& entry() const { return *entry_; }
  void* handle() const { return handle_; }
  /// The dataset table of `component`; fails the test when absent.
  const tp_dataset_v1_t& dataset_table(const char* component) const {
    const void* t = entry_->get_interface(component, TP_IFACE_DATASET_V1);
    REQUIRE(t != nullptr);
    return *static_cast<const tp_dataset_v1_t*>(t);
  }
  /// DT_NEEDED entries of the library: what it links, whatever the test process has loaded.
  std::vector<std::string> needed_libraries() const {
    link_map* map = nullptr;
    REQUIRE(dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0);
    uintptr_t strtab = 0;
    for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d)
      if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
    // glibc relocates .dynamic pointers on x86-64, but not on every target: rebase if needed.
    if (strtab < map->l_addr) strtab += map->l_addr;
    std::vector<std::string> out;
    for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d)
      if (d->d_tag == DT_NEEDED) out.emplace_back(reinterpret_cast<const char*>(strtab + d->d_un.d_val));
    return out;
  }

  FakeHost host; ///< outlives every instance; holds the last fail() message
 private:
  void* handle_ = nullptr;
  const tp_plugin_entry_t* entry_ = nullptr;
};

/// One dataset instance, created through the C ABI and destroyed on destruction.
class Dataset {
 public:
  Dataset(PluginLibrary& lib, const char* component, const FakeConfig& cfg, const char* split)
      : table_(lib.dataset_table(component)) {
    const tp_status status = table_.create(&lib.host.host, &cfg.view, split, &self_);
    REQUIRE_MESSAGE(status == TP_OK, "create failed: " << lib.host.last_error);
    REQUIRE(self_ != nullptr);
  }
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;
  ~Dataset() { destroy(); }

  /// Destroys the instance now (samples already taken stay valid, PLG-13).
  void destroy() {
    table_.destroy(self_);
    self_ = nullptr;
  }
  uint64_t size() const {
    uint64_t n = 0;
    REQUIRE(table_.size(self_, &n) == TP_OK);
    return n;
  }
  /// get_sample with full control; on success `out` owns the fields.
  tp_status try_get(uint64_t index, const tp_worker_ctx_t* ctx, Sample& out,
                    uint32_t capacity = 16) const {
    std::vector<tp_field_t> buffer(capacity);
    uint32_t count = 0;
    const tp_status status = table_.get_sample(self_, index, ctx, buffer.data(), capacity, &count);
    if (status == TP_OK) out.adopt(buffer.data(), count);
    return status;
  }
  /// The sample at `index` for a host seed; fails the test on error. Callable from any thread
  /// (the status is checked with CHECK, which doctest allows off the main thread).
  Sample get(uint64_t index, uint64_t seed = 0, uint32_t worker = 0) const {
    const tp_worker_ctx_t ctx = worker_ctx(seed, worker);
    Sample s;
    CHECK(try_get(index, &ctx, s) == TP_OK);
    return s;
  }
  /// The class names the instance lends (ABI 1.12); empty when it has no class_names or lends NULL.
  std::vector<std::string> class_names() const {
    if (table_.class_names == nullptr) return {};
    const tp_class_names_t* lent = nullptr;
    REQUIRE(table_.class_names(self_, &lent) == TP_OK);
    if (lent == nullptr) return {};
    return std::vector<std::string>(lent->names, lent->names + lent->count);
  }
  /// The sample names the instance lends (ABI 1.13), in index order; empty when it has no sample_keys.
  std::vector<std::string> sample_keys() const {
    if (table_.sample_keys == nullptr) return {};
    const char* const* keys = nullptr;
    uint64_t count = 0;
    REQUIRE(table_.sample_keys(self_, &keys, &count) == TP_OK);
    std::vector<std::string> out;
    for (uint64_t i = 0; i < count; ++i) out.emplace_back(keys[i] != nullptr ? keys[i] : "");
    return out;
  }
  const tp_dataset_v1_t& table() const { return table_; }
  const void* self() const { return self_; }

 private:
  const tp_dataset_v1_t& table_;
  void* self_ = nullptr;
};

}  // namespace tp::test
