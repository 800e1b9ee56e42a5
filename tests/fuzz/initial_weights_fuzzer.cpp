// Fuzz target: train.init_weights, through load_initial_weights as the engine calls it, on a
// torch.save zip, a host checkpoint or a .safetensors file (told apart by content, as in a run).
// The model is {"weight": float[4, 3], "bias": float[4]} (nn.Linear(3, 4), the seeds' state
// dict), so mutated seeds reach the name and shape matching and the copy into the model. Every
// input must load or throw tp::Error (ConfigError exit 2, CheckpointError exit 4); any other
// exception, a crash or a sanitizer report is a finding. The bytes go through a file because the
// entry point takes a path (and reads it once).
#include <unistd.h>

#include <ATen/ops/zeros.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "tp/framework/checkpoint/initial_weights.h"
#include "tp/framework/error.h"

namespace {

/// The file the inputs go through: one per process, removed at exit.
struct InputFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tp-fuzz-initial-weights-" + std::to_string(::getpid()) + ".pt");
  ~InputFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const InputFile file;
  std::ofstream(file.path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  const std::vector<tp::StateTensor> model = {{"weight", at::zeros({4, 3}), false}, {"bias", at::zeros({4}), false}};
  try {
    (void)tp::load_initial_weights(file.path, model);
  } catch (const tp::Error&) {
    // ConfigError or CheckpointError: the expected ways to refuse a file.
  }
  return 0;
}
