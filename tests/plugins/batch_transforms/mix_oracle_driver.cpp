// Driver of the torchvision oracle for mix.so (mix_oracle.py): loads the plugin through its C
// ABI, applies each case to a fixed random batch and writes, per case, the inputs, the outputs
// and the parameters draw_mix_params gave the seed, for torchvision's MixUp/CutMix.transform to
// reproduce. Usage: mix_oracle_driver <mix.so> <output dir>
#include <ATen/ATen.h>
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "mix_params.h"
#include "support/fake_host.h"
#include "tp/iface/batch_transform.h"

namespace {

struct Case {
  const char* component;
  uint64_t seed;
  tp::mix::MixPolicy policy;  // must equal the component's options below
  double alpha;               // mixup/cutmix "alpha", or 0 for mixup_cutmix (its defaults)
};

void write(const at::Tensor& t, const std::string& path) {
  const at::Tensor c = t.contiguous().cpu();
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: mix_oracle_driver <mix.so> <output dir>\n"), 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::fprintf(stderr, "%s\n", dlerror()), 1;
  const auto* entry = static_cast<const tp_plugin_entry_t*>(dlsym(lib, TP_ENTRY_SYMBOL));
  tp::test::FakeHost host;
  host.host.tensor_release = [](const tp_host_t*, tp_tensor h) { delete reinterpret_cast<at::Tensor*>(h); };
  if (entry == nullptr || entry->init(&host.host) != TP_OK) return std::fprintf(stderr, "init failed\n"), 1;

  constexpr int64_t kB = 8, kC = 3, kH = 17, kW = 23, kClasses = 10;
  const Case cases[] = {
      {"org.torchhost.mixup", 1, {0.2, 0.0, 0.5, 1.0}, 0.2},   {"org.torchhost.mixup", 2, {1.0, 0.0, 0.5, 1.0}, 1.0},
      {"org.torchhost.cutmix", 3, {0.0, 1.0, 0.5, 1.0}, 1.0},  {"org.torchhost.cutmix", 4, {0.0, 0.3, 0.5, 1.0}, 0.3},
      {"org.torchhost.cutmix", 5, {0.0, 5.0, 0.5, 1.0}, 5.0},
  };
  std::string list;
  int index = 0;
  auto run = [&](const char* component, uint64_t seed, const tp::mix::MixPolicy& policy, double alpha) {
    const auto* table = static_cast<const tp_batch_transform_v1_t*>(entry->get_interface(component, TP_IFACE_BATCH_TRANSFORM_V1));
    tp::test::FakeConfig cfg;
    cfg.values = {{"num_classes", kClasses}, {"input", std::string("image")}, {"target", std::string("label")}};
    if (alpha > 0) cfg.values["alpha"] = alpha;
    else cfg.values = {{"num_classes", kClasses}, {"input", std::string("image")}, {"target", std::string("label")},
                       {"mixup_alpha", policy.mixup_alpha}, {"cutmix_alpha", policy.cutmix_alpha},
                       {"switch_prob", policy.switch_prob}, {"prob", policy.prob}};
    void* self = nullptr;
    if (table == nullptr || table->create(&host.host, &cfg.view, &self) != TP_OK) {
      std::fprintf(stderr, "create %s: %s\n", component, host.last_error.c_str());
      std::exit(1);
    }
    at::manual_seed(static_cast<uint64_t>(index));
    const at::Tensor x = at::rand({kB, kC, kH, kW});
    const at::Tensor y = at::randint(kClasses, {kB}, at::kLong);
    const tp_named_tensor_t fields[] = {{"image", reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&x))},
                                        {"label", reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&y))}};
    tp_named_tensor_t out[2] = {};
    uint32_t count = 0;
    if (table->apply(self, seed, fields, 2, out, 2, &count) != TP_OK) {
      std::fprintf(stderr, "apply %s: %s\n", component, host.last_error.c_str());
      std::exit(1);
    }
    at::Tensor out_x = x, out_y;
    for (uint32_t i = 0; i < count; ++i) {
      at::Tensor* t = reinterpret_cast<at::Tensor*>(out[i].tensor);
      (std::string(out[i].name) == "image" ? out_x : out_y) = *t;
      delete t;
    }
    table->destroy(self);
    const tp::mix::MixParams p = tp::mix::draw_mix_params(seed, policy, kH, kW);
    const std::string stem = std::string(argv[2]) + "/case" + std::to_string(index);
    write(x, stem + "_x.bin");
    write(y, stem + "_y.bin");
    write(out_x, stem + "_out_x.bin");
    write(out_y, stem + "_out_y.bin");
    char line[512];
    std::snprintf(line, sizeof line, "%d %s %llu %d %d %.17g %lld %lld %lld %lld\n", index, component,
                  static_cast<unsigned long long>(seed), p.applied ? 1 : 0, p.cutmix ? 1 : 0, p.lam,
                  static_cast<long long>(p.x1), static_cast<long long>(p.y1), static_cast<long long>(p.x2),
                  static_cast<long long>(p.y2));
    list += line;
    ++index;
  };
  for (const Case& c : cases) run(c.component, c.seed, c.policy, c.alpha);
  // mixup_cutmix over many seeds: both methods and skipped batches (prob 0.7) all occur.
  for (uint64_t seed = 100; seed < 124; ++seed) run("org.torchhost.mixup_cutmix", seed, {0.8, 1.0, 0.5, 0.7}, 0.0);
  std::ofstream(std::string(argv[2]) + "/cases.txt") << "B " << kB << " C " << kC << " H " << kH << " W " << kW
                                                       << " classes " << kClasses << "\n" << list;
  return 0;
}
