// What the oracle drivers of basic_losses and basic_metrics share (segmentation_oracle,
// multilabel_oracle): a plugin library opened through its C ABI with a fake host, tensors handed
// across it by handle, and results written as raw files for the Python side to read.
#pragma once

#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "support/fake_host.h"
#include "tp/entry.h"
#include "tp/iface/metric.h"

namespace tp::test::oracle {

/// A plugin library's entry and the fake host it was initialised with.
struct Library {
  const tp_plugin_entry_t* entry = nullptr;
  tp::test::FakeHost host;
};

/// Ends the driver (exit 1) with `what` on stderr: the Python side reports the failed run.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "oracle driver: %s\n", what.c_str());
  std::exit(1);
}

/// Opens `path` and initialises it with `lib`'s fake host (which releases tensors by deleting them).
inline void open(Library& lib, const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) fail(dlerror());
  lib.entry = static_cast<const tp_plugin_entry_t*>(dlsym(handle, TP_ENTRY_SYMBOL));
  lib.host.host.tensor_release = [](const tp_host_t*, tp_tensor h) { delete reinterpret_cast<at::Tensor*>(h); };
  if (lib.entry == nullptr || lib.entry->init(&lib.host.host) != TP_OK) fail(std::string("init failed: ") + path);
}

/// `t` as the ABI's borrowed tensor handle.
inline tp_tensor handle_of(const at::Tensor& t) { return reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&t)); }

/// Writes `t` as raw little-endian values into `dir`/`name` and returns `name`.
inline std::string write(const at::Tensor& t, const std::string& dir, const std::string& name) {
  const at::Tensor c = t.contiguous().cpu();
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  return name;
}

/// The values `metric`'s compute reports for `self`, as " <name> <value>" each with every digit of
/// a double (what the Python side parses); ends the driver naming `what` when compute fails.
inline std::string metric_values(Library& lib, const tp_metric_v1_t& metric, void* self, const std::string& what) {
  tp_scalar_t v[64];
  uint32_t n = 0;
  if (metric.compute(self, v, 64, &n) != TP_OK) fail(what + " compute: " + lib.host.last_error);
  std::string line;
  char item[96];
  for (uint32_t i = 0; i < n; ++i) {
    std::snprintf(item, sizeof item, " %s %.17g", v[i].name, v[i].value);
    line += item;
  }
  return line;
}

}  // namespace tp::test::oracle
