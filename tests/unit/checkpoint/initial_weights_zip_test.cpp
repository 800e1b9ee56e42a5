// train.init_weights on a hostile torch.save zip (issue 27, "Untrusted weight files"): a tensor
// whose pickle claims more elements than its storage record holds is refused with a
// CheckpointError naming the key and the file, and nothing is copied into the model. Before the
// fix the initial-weights reader had none of the checkpoint reader's checks: LibTorch's unpickler
// sized the storage by the pickle's claim, and the copy into the model read 3,992 bytes past the
// 8-byte record (garbage in the weights; this test's second case failed, the load succeeding).
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/checkpoint/initial_weights.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

/// A torch.save-style zip of the state_dict {"w": `tensor`} whose storage record "data/0" holds
/// only `record_bytes` bytes of the tensor's data (all of it when `record_bytes` is npos).
// A torch.save zip of {"w": tensor}, or with `wrap`, {wrap: {"w": tensor}, "epoch": 3} (timm's
// train.py and Lightning's checkpoint layout when `wrap` is "state_dict").
void write_state_dict_zip(const fs::path& path, const at::Tensor& tensor, std::size_t record_bytes,
                          const char* wrap = nullptr) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  c10::Dict<std::string, at::Tensor> state;
  state.insert("w", tensor);
  pickler.protocol();
  if (wrap != nullptr) {
    c10::impl::GenericDict outer(c10::StringType::get(), c10::AnyType::get());
    outer.insert(std::string(wrap), c10::IValue(state));
    outer.insert(std::string("epoch"), c10::IValue(int64_t{3}));
    pickler.pushIValue(c10::IValue(outer));
  } else {
    pickler.pushIValue(c10::IValue(state));
  }
  pickler.stop();
  REQUIRE(pickler.tensorData().size() == 1);
  std::vector<char> zip;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    zip.insert(zip.end(), static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
    return n;
  });
  const std::size_t stored = std::min(record_bytes, tensor.nbytes());
  writer.writeRecord("data/0", tensor.data_ptr(), stored);
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeEndOfFile();
  std::ofstream(path, std::ios::binary).write(zip.data(), static_cast<std::streamsize>(zip.size()));
}

std::vector<tp::StateTensor> zero_model() { return {{"w", at::zeros({1000}), false}}; }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "tp_initial_weights_zip_test";
  fs::create_directories(dir);
  return dir / name;
}

}  // namespace

TEST_CASE("a torch.save zip whose tensor fits its storage record loads (the crafted file is well-formed)") {
  const fs::path file = scratch("whole.pt");
  write_state_dict_zip(file, at::arange(1000, at::kFloat), std::string::npos);
  const auto model = zero_model();
  CHECK(tp::load_initial_weights(file, model).loaded == 1);
  CHECK(at::equal(model[0].tensor, at::arange(1000, at::kFloat)));
}

// A fine-tuning trial's timm and Lightning checkpoints were refused with no word of where their
// weights were: timm's train.py and Lightning keep them under "state_dict".
TEST_CASE("weights under \"state_dict\" load; a dict without them names its keys and how to save the weights") {
  const fs::path wrapped = scratch("wrapped.pt");
  write_state_dict_zip(wrapped, at::arange(1000, at::kFloat), std::string::npos, "state_dict");
  const auto model = zero_model();
  CHECK(tp::load_initial_weights(wrapped, model).loaded == 1);
  CHECK(at::equal(model[0].tensor, at::arange(1000, at::kFloat)));
  const fs::path elsewhere = scratch("elsewhere.pt");
  write_state_dict_zip(elsewhere, at::arange(1000, at::kFloat), std::string::npos, "weights");
  try {
    tp::load_initial_weights(elsewhere, zero_model());
    FAIL("loaded weights from an unknown key");
  } catch (const std::exception& e) {
    const std::string message = e.what();
    CHECK(message.find("its top-level keys: weights, epoch") != std::string::npos);
    CHECK(message.find("torch.save(checkpoint[") != std::string::npos);
  }
}

TEST_CASE("a tensor claiming more elements than its storage record is refused, naming the key and the file") {
  const fs::path file = scratch("past_storage.pt");
  write_state_dict_zip(file, at::arange(1000, at::kFloat), 8);  // 2 of the 1000 floats stored
  const auto model = zero_model();
  try {
    tp::load_initial_weights(file, model);
    FAIL("a tensor reaching past its storage record loaded");
  } catch (const tp::CheckpointError& e) {
    const std::string message = e.what();
    CHECK(e.exit_code() == tp::kExitCheckpoint);
    CHECK(message.find("train.init_weights") != std::string::npos);
    CHECK(message.find(file.string()) != std::string::npos);
    CHECK(message.find("'w' claims more elements than its storage record holds") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);  // one paragraph
  }
  CHECK(at::equal(model[0].tensor, at::zeros({1000})));  // nothing copied
}

TEST_CASE("a zip LibTorch's reader would leak on is refused before it reads a byte") {
  // No version record: PyTorchStreamReader's constructor throws (and leaks its zip state).
  const fs::path file = scratch("no_version.pt");
  std::vector<char> zip;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    zip.insert(zip.end(), static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
    return n;
  });
  writer.writeRecord("data.pkl", "\x80\x02}q\x00.", 6);
  writer.writeEndOfFile();
  // Drop every version record by renaming it in place (same length, so the zip stays valid).
  for (const std::string from : {"archive/version", "archive/.data/version"}) {
    const std::string to = std::string(from).replace(from.rfind("version"), 7, "vXrsion");
    for (auto at = std::search(zip.begin(), zip.end(), from.begin(), from.end()); at != zip.end();
         at = std::search(at, zip.end(), from.begin(), from.end()))
      std::copy(to.begin(), to.end(), at);
  }
  std::ofstream(file, std::ios::binary).write(zip.data(), static_cast<std::streamsize>(zip.size()));
  try {
    tp::load_initial_weights(file, zero_model());
    FAIL("an archive without a version record loaded");
  } catch (const tp::CheckpointError& e) {
    const std::string message = e.what();
    CHECK(message.find("train.init_weights") != std::string::npos);
    CHECK(message.find("version") != std::string::npos);
  }
}

TEST_CASE("a torch.save file in the legacy (non-zip) format is named, with how to save it again") {
  // The first bytes torch.save(..., _use_new_zipfile_serialization=False) writes: PROTO 2, then
  // LONG1 of 10 bytes, the magic number 0x1950a86a20f9469cfc6c. Before, it was read as
  // safetensors: "its header length exceeds the file".
  const fs::path file = scratch("legacy.pt");
  const unsigned char legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(legacy), sizeof(legacy));
  try {
    tp::load_initial_weights(file, zero_model());
    FAIL("a legacy file loaded");
  } catch (const tp::ConfigError& e) { // the file given is of the wrong kind: exit 2
    const std::string message = e.what();
    CHECK(message.find("legacy format") != std::string::npos);
    CHECK(message.find("_use_new_zipfile_serialization=False") != std::string::npos);
    CHECK(message.find("header length") == std::string::npos);
  }
}

TEST_CASE("initial weights holding NaN or infinity are refused, naming the tensors, before any is copied") {
  // They used to load, and the first step's finiteness guard then blamed "the update of step 1".
  const fs::path file = scratch("non_finite.pt");
  at::Tensor w = at::arange(1000, at::kFloat);
  w[3] = std::numeric_limits<float>::quiet_NaN();
  w[7] = std::numeric_limits<float>::infinity();
  write_state_dict_zip(file, w, std::string::npos);
  const auto model = zero_model();
  try {
    tp::load_initial_weights(file, model);
    FAIL("weights with NaN loaded");
  } catch (const tp::ConfigError& e) {
    const std::string message = e.what();
    CHECK(e.key_path() == "train.init_weights");
    CHECK(message.find("NaN or infinite values in 'w'") != std::string::npos);
    CHECK(message.find(file.string()) != std::string::npos);
  }
  CHECK(at::equal(model[0].tensor, at::zeros({1000}))); // nothing copied
}
