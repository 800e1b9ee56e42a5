// Activation checkpointing benchmark: peak memory and time of one training step of
// org.torchhost.deep_cnn on the CPU, with checkpointing off and on, as ratios.
//
//   activation_checkpointing_bench [--plugin-dir DIR] [--batch 64] [--depth 16] [--width 32]
//       [--image-size 32] [--residual 1] [--steps 5] [--threads 0]
//
// Each mode runs in its own forked process, so the peak RSS of one cannot hide the other's. The
// model is driven through the plugin's C ABI (tp_model_v1_t), exactly as the host drives it: create,
// set_training, set_activation_checkpointing, forward; the step adds cross-entropy, backward and a
// plain SGD update (the optimizer's memory is the same in both modes).
//
// Memory is measured two ways:
//   - allocator: every LibTorch CPU allocation goes through a counting wrapper around the default
//     CPU allocator (c10::SetCPUAllocator); "step peak" is the largest number of bytes live during
//     a step minus the bytes live before it (activations, gradients, workspaces; not the weights).
//   - RSS: the process's VmHWM (peak resident set) from /proc/self/status, which also sees memory
//     that does not come from the LibTorch allocator (oneDNN scratch, malloc in kernels).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tp/entry.h"
#include "tp/iface/model.h"

namespace {

/* Counting allocator */

/// Wraps the default CPU allocator and tracks live and peak bytes. Data pointer == context, as the
/// default allocator's are, so raw_allocate/raw_deallocate (oneDNN's engine allocator) keep working.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) { instance() = this; }

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr) return inner;
    c10::DeleterFnPtr base_deleter = inner.get_deleter();
    void* ctx = inner.release_context();
    if (ctx != data) {  // not the default allocator's layout: give up counting this one
      return c10::DataPtr(data, ctx, base_deleter, c10::Device(c10::kCPU));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[data] = {n, base_deleter};
      live_ += n;
      peak_ = std::max(peak_, live_);
    }
    return c10::DataPtr(data, data, &CountingAllocator::release, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  size_t live() {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_;
  }
  size_t peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  /// Starts a new peak window at the current live bytes.
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = live_;
  }

 private:
  struct Entry {
    size_t size;
    c10::DeleterFnPtr deleter;
  };
  static CountingAllocator*& instance() {
    static CountingAllocator* self = nullptr;
    return self;
  }
  static void release(void* ptr) {
    if (ptr == nullptr) return;  // raw_deallocate of a zero-byte raw_allocate (oneDNN does it)
    CountingAllocator* self = instance();
    Entry e{0, nullptr};
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->sizes_.find(ptr);
      if (it == self->sizes_.end()) std::abort();  // not ours: a bug in this benchmark
      e = it->second;
      self->live_ -= e.size;
      self->sizes_.erase(it);
    }
    e.deleter(ptr);
  }

  c10::Allocator* base_;
  std::mutex mutex_;
  std::unordered_map<void*, Entry> sizes_;
  size_t live_ = 0;
  size_t peak_ = 0;
};

CountingAllocator* g_counter = nullptr;

/// A field of /proc/self/status in bytes: "VmHWM" (peak resident set) or "VmRSS" (current).
size_t proc_status_bytes(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(status, line);)
    if (line.rfind(prefix, 0) == 0) return std::stoull(line.substr(prefix.size())) * 1024;
  return 0;
}

/* Minimal host and config for driving the plugin */

std::string g_last_error;

tp_host_t make_host() {
  tp_host_t host{};
  host.struct_size = sizeof(tp_host_t);
  host.abi = TP_ABI_VERSION_INIT;
  host.fail = [](const tp_host_t*, tp_status code, const char* msg) {
    g_last_error = msg != nullptr ? msg : "";
    return code;
  };
  host.log = [](const tp_host_t*, int32_t, const char* msg) { std::fprintf(stderr, "[plugin] %s\n", msg); };
  host.get_service = [](const tp_host_t*, const char*) -> const void* { return nullptr; };
  host.tensor_release = [](const tp_host_t*, tp_tensor h) { delete reinterpret_cast<at::Tensor*>(h); };
  return host;
}

using Value = std::variant<bool, int64_t, std::string>;

struct Config {
  std::map<std::string, Value> values;
  tp_config_t view{};
  Config() {
    view.struct_size = sizeof(tp_config_t);
    view.self = this;
    view.get_bool = [](const void* s, const char* k, bool* out) { return get(s, k, out); };
    view.get_int = [](const void* s, const char* k, int64_t* out) { return get(s, k, out); };
    view.get_string = [](const void* s, const char* k, const char** out) {
      const auto* self = static_cast<const Config*>(s);
      auto it = self->values.find(k);
      if (it == self->values.end() || !std::holds_alternative<std::string>(it->second)) return tp_status{TP_ERR_CONFIG};
      *out = std::get<std::string>(it->second).c_str();
      return tp_status{TP_OK};
    };
  }
  template <typename T>
  static tp_status get(const void* s, const char* k, T* out) {
    const auto* self = static_cast<const Config*>(s);
    auto it = self->values.find(k);
    if (it == self->values.end() || !std::holds_alternative<T>(it->second)) return TP_ERR_CONFIG;
    *out = std::get<T>(it->second);
    return TP_OK;
  }
};

void check(tp_status status, const char* what) {
  if (status == TP_OK) return;
  std::fprintf(stderr, "%s failed (%d): %s\n", what, status, g_last_error.c_str());
  std::exit(1);
}

/* The measurement */

struct Options {
  std::string plugin_dir;
  int64_t batch = 64, depth = 16, width = 32, image_size = 32, steps = 5, threads = 0;
  bool residual = true;
};

struct Result {
  double step_peak_mib = 0;   // allocator: max over steps of (peak during step - live before it)
  double total_peak_mib = 0;  // allocator: max live bytes over the steps, weights included
  double rss_peak_mib = 0;    // VmHWM of the process
  double rss_growth_mib = 0;  // VmHWM minus VmRSS before the first step: what the steps added
  double median_ms = 0;       // step time, median over the timed steps
  double min_ms = 0;          // fastest timed step (least disturbed by other load on the machine)
  double loss = 0;            // first step's loss (both modes must agree)
};

Result run_mode(const Options& o, bool checkpointing) {
  if (o.threads > 0) at::set_num_threads(static_cast<int>(o.threads));
  const std::string path = o.plugin_dir + "/vision_models.so";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
    std::exit(1);
  }
  const auto* entry = static_cast<const tp_plugin_entry_t*>(dlsym(lib, TP_ENTRY_SYMBOL));
  static tp_host_t host = make_host();
  check(entry->init(&host), "init");
  const auto* table = static_cast<const tp_model_v1_t*>(entry->get_interface("org.torchhost.deep_cnn", TP_IFACE_MODEL_V1));
  if (table == nullptr || table->struct_size < sizeof(tp_model_v1_t) || table->set_activation_checkpointing == nullptr) {
    std::fprintf(stderr, "org.torchhost.deep_cnn with set_activation_checkpointing not found in %s\n", path.c_str());
    std::exit(1);
  }

  Config cfg;
  cfg.values = {{"input", std::string("image")}, {"in_channels", int64_t{3}}, {"num_classes", int64_t{3}},
                {"width", o.width}, {"depth", o.depth}, {"image_size", o.image_size}, {"residual", o.residual}};
  at::manual_seed(0);
  void* self = nullptr;
  check(table->create(&host, &cfg.view, &self), "create");
  check(table->to_device(self, TP_DEVICE_CPU, 0, TP_DTYPE_FLOAT32), "to_device");
  std::vector<at::Tensor> params;
  check(table->visit_state(
            self,
            [](void* user, const char*, tp_tensor t, bool is_buffer) {
              if (!is_buffer) static_cast<std::vector<at::Tensor>*>(user)->push_back(*reinterpret_cast<at::Tensor*>(t));
              return tp_status{TP_OK};
            },
            &params),
        "visit_state");
  check(table->set_activation_checkpointing(self, checkpointing), "set_activation_checkpointing");
  check(table->set_training(self, true), "set_training");

  const at::Tensor images = at::randn({o.batch, 3, o.image_size, o.image_size});
  const at::Tensor labels = at::randint(0, 3, {o.batch}, at::kLong);

  Result r;
  std::vector<double> times;
  const size_t rss_before = proc_status_bytes("VmRSS");
  for (int64_t step = 0; step <= o.steps; ++step) {  // step 0 warms up and is not timed
    const size_t before = g_counter->live();
    g_counter->reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    {
      // 1. Forward (as the host: every batch field is an input)
      tp_named_tensor_t inputs[2] = {{"image", reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&images))},
                                     {"label", reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&labels))}};
      tp_named_tensor_t outputs[4];
      uint32_t count = 0;
      check(table->forward(self, inputs, 2, outputs, 4, &count), "forward");
      at::Tensor logits = *reinterpret_cast<at::Tensor*>(outputs[0].tensor);
      for (uint32_t i = 0; i < count; ++i) host.tensor_release(&host, outputs[i].tensor);
      at::Tensor loss = at::cross_entropy_loss(logits, labels);
      logits = at::Tensor();
      // 2. Backward
      loss.backward();
      if (step == 0) r.loss = loss.item<double>();
      // 3. Update (SGD), then drop the gradients (set_to_none)
      at::NoGradGuard no_grad;
      for (at::Tensor& p : params) {
        p.sub_(p.grad(), 0.01);
        p.mutable_grad().reset();
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const size_t peak = g_counter->peak();
    if (step == 0) continue;
    times.push_back(ms);
    r.step_peak_mib = std::max(r.step_peak_mib, static_cast<double>(peak - before) / (1 << 20));
    r.total_peak_mib = std::max(r.total_peak_mib, static_cast<double>(peak) / (1 << 20));
  }
  std::sort(times.begin(), times.end());
  r.median_ms = times[times.size() / 2];
  r.min_ms = times.front();
  r.rss_peak_mib = static_cast<double>(proc_status_bytes("VmHWM")) / (1 << 20);
  r.rss_growth_mib = r.rss_peak_mib - static_cast<double>(rss_before) / (1 << 20);
  table->destroy(self);
  return r;
}

/// Runs one mode in a child process and reads its Result back through a pipe.
Result run_in_child(const Options& o, bool checkpointing) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Result r = run_mode(o, checkpointing);
    if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Result r;
  const ssize_t got = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "the %s run failed\n", checkpointing ? "checkpointing-on" : "checkpointing-off");
    std::exit(1);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
#ifdef TP_BENCH_PLUGIN_DIR
  o.plugin_dir = TP_BENCH_PLUGIN_DIR;
#endif
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--plugin-dir") o.plugin_dir = value;
    else if (key == "--batch") o.batch = std::stoll(value);
    else if (key == "--depth") o.depth = std::stoll(value);
    else if (key == "--width") o.width = std::stoll(value);
    else if (key == "--image-size") o.image_size = std::stoll(value);
    else if (key == "--residual") o.residual = value != "0";
    else if (key == "--steps") o.steps = std::stoll(value);
    else if (key == "--threads") o.threads = std::stoll(value);
    else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of the source)\n", key.c_str());
      return 2;
    }
  }
  if (o.plugin_dir.empty() || o.steps < 1) {
    std::fprintf(stderr, "usage: %s --plugin-dir <dir with vision_models.so> [--batch N] [--depth N] ...\n", argv[0]);
    return 2;
  }
  // Installed before any tensor exists (and before fork), so every later CPU tensor is counted.
  static CountingAllocator counter(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&counter, /*priority=*/100);
  g_counter = &counter;

  std::printf("deep_cnn: batch %lld, %lldx%lld images, depth %lld, width %lld, residual %s; CPU, %s threads; "
              "median of %lld steps\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.image_size), static_cast<long long>(o.image_size),
              static_cast<long long>(o.depth), static_cast<long long>(o.width), o.residual ? "yes" : "no",
              o.threads > 0 ? std::to_string(o.threads).c_str() : "default", static_cast<long long>(o.steps));
  const Result off = run_in_child(o, false);
  const Result on = run_in_child(o, true);
  std::printf("%-14s %16s %17s %15s %17s %10s %10s %10s\n", "checkpointing", "step peak (MiB)", "total peak (MiB)",
              "peak RSS (MiB)", "RSS growth (MiB)", "median ms", "min ms", "loss");
  for (const auto& [name, r] : {std::pair<const char*, Result>{"off", off}, {"on", on}})
    std::printf("%-14s %16.1f %17.1f %15.1f %17.1f %10.1f %10.1f %10.6f\n", name, r.step_peak_mib, r.total_peak_mib,
                r.rss_peak_mib, r.rss_growth_mib, r.median_ms, r.min_ms, r.loss);
  std::printf("%-14s %16.3f %17.3f %15.3f %17.3f %10.3f %10.3f\n", "ratio on/off", on.step_peak_mib / off.step_peak_mib,
              on.total_peak_mib / off.total_peak_mib, on.rss_peak_mib / off.rss_peak_mib,
              on.rss_growth_mib / off.rss_growth_mib, on.median_ms / off.median_ms, on.min_ms / off.min_ms);
  return 0;
}
