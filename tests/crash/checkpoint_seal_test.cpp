// The checkpoint integrity layer: the CRC-32C seal, the zip bounds checks, and --resume auto's
// choice of the newest checkpoint that loads when newer ones are damaged (hard links included).
#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_manager.h"
#include "tp/framework/checkpoint/checkpoint_seal.h"

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using namespace tp;

std::vector<char> read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::filesystem::path& file, const std::vector<char>& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A small but complete checkpoint at `step`.
void save_at(const std::filesystem::path& file, int64_t step) {
  std::vector<StateTensor> model{{"w", at::full({4, 3}, static_cast<double>(step)), false}};
  CheckpointContents contents;
  contents.model_state = &model;
  contents.step = step;
  contents.config_toml = "[run]\n";
  save_checkpoint(file, contents);
}

/// The CheckpointError message of `fn`, or "" when it does not throw one.
template <typename Fn>
std::string checkpoint_error(Fn&& fn) {
  try {
    fn();
  } catch (const CheckpointError& e) {
    CHECK(e.exit_code() == kExitCheckpoint);
    return e.what();
  }
  return "";
}

using tp::test::contains;

TEST_CASE("crc32c matches the Castagnoli check value, whole or in pieces") {
  const std::string text = "123456789";
  CHECK(crc32c(text.data(), text.size()) == 0xe3069283u); // the standard CRC-32C check value
  CHECK(crc32c(text.data() + 4, 5, crc32c(text.data(), 4)) == 0xe3069283u);
  std::vector<char> big(1 << 16);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  // 8-byte words and the byte tail must agree with a byte-at-a-time computation over any split.
  uint32_t bytewise = 0;
  for (char c : big) bytewise = crc32c(&c, 1, bytewise);
  CHECK(crc32c(big.data(), big.size()) == bytewise);
}

TEST_CASE("a saved checkpoint is sealed, loads, and every single-byte change or truncation is caught") {
  const auto dir = test::fresh_dir("seal_basic");
  save_at(dir / "a.pt", 5);
  const std::vector<char> bytes = read_all(dir / "a.pt");
  CHECK(verify_checkpoint(bytes.data(), bytes.size(), "a.pt") == SealState::kSealed);
  CHECK(load_checkpoint(dir / "a.pt").step == 5);

  // A flipped bit anywhere: in the tensor data, the pickle, the zip directory, the seal itself.
  for (std::size_t at : {std::size_t{0}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 40, bytes.size() - 30,
                         bytes.size() - 1}) {
    std::vector<char> flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    write_all(dir / "flipped.pt", flipped);
    const std::string message = checkpoint_error([&] { load_checkpoint(dir / "flipped.pt"); });
    INFO("byte " << at << ": " << message);
    CHECK(contains(message, (dir / "flipped.pt").string()));
    CHECK(contains(message, "damaged"));
  }
  for (std::size_t size : {std::size_t{0}, std::size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    write_all(dir / "short.pt", std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)));
    const std::string message = checkpoint_error([&] { load_checkpoint(dir / "short.pt"); });
    INFO(size << " bytes: " << message);
    CHECK(contains(message, "short.pt"));
  }
  CHECK(contains(checkpoint_error([&] { load_checkpoint(dir / "missing.pt"); }), "missing.pt"));
}

TEST_CASE("an unsealed (pre-seal) checkpoint still loads; a damaged one is still refused") {
  const auto dir = test::fresh_dir("seal_legacy");
  save_at(dir / "a.pt", 3);
  std::vector<char> bytes = read_all(dir / "a.pt");
  // Undo the seal: drop the 25-byte comment and zero the comment length, as before sealing.
  bytes.erase(bytes.end() - 25, bytes.end());
  bytes[bytes.size() - 2] = 0;
  bytes[bytes.size() - 1] = 0;
  write_all(dir / "legacy.pt", bytes);
  CHECK(verify_checkpoint(bytes.data(), bytes.size(), "legacy.pt") == SealState::kLegacy);
  CHECK(load_checkpoint(dir / "legacy.pt").step == 3);
  bytes.erase(bytes.end() - 100, bytes.end());
  write_all(dir / "legacy.pt", bytes);
  CHECK(contains(checkpoint_error([&] { load_checkpoint(dir / "legacy.pt"); }), "zip end record"));
}

TEST_CASE("a checkpoint sealed as it streams equals one sealed whole, in pieces of any size") {
  const auto dir = test::fresh_dir("seal_stream");
  save_at(dir / "a.pt", 7);
  const std::vector<char> written = read_all(dir / "a.pt");
  std::vector<char> archive = written;  // the zip writer's bytes: without the seal, comment length 0
  archive.erase(archive.end() - 25, archive.end());
  archive[archive.size() - 2] = 0;
  archive[archive.size() - 1] = 0;
  std::vector<char> whole = archive;
  seal_checkpoint(whole);
  CHECK(whole == written);
  for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{21}, std::size_t{22}, std::size_t{23},
                                  std::size_t{4096}, archive.size()}) {
    CAPTURE(piece);
    std::vector<char> streamed;
    std::size_t calls = 0;
    CheckpointSealer sealer([&](const char* bytes, std::size_t size) {
      streamed.insert(streamed.end(), bytes, bytes + size);
      ++calls;
    });
    for (std::size_t at = 0; at < archive.size(); at += piece)
      sealer.write(archive.data() + at, std::min(piece, archive.size() - at));
    sealer.finish();
    CHECK(streamed == written);
    CHECK(calls >= 2);
  }
  CheckpointSealer cut([](const char*, std::size_t) {});
  cut.write(archive.data(), archive.size() - 1);  // an archive without its last byte has no end record
  CHECK_THROWS_AS(cut.finish(), tp::Error);
}

TEST_CASE("forged pickle lengths, memo ids and globals are refused by name before LibTorch reads them") {
  // Past fuzz findings (tests/fuzz/corpus/checkpoint, fed unsealed: first byte 0): each would
  // make LibTorch's unpickler allocate gigabytes; the opcode walk (pickle_walk.h) refuses it.
  const std::pair<const char*, const char*> cases[] = {
      {"regression_oom_huge_memo_id.bin", "its pickle stores memo entry "},
      {"regression_oom_unterminated_global.bin", "that never ends"},
      {"regression_timeout_huge_pickle_string.bin", "-byte value with "},
  };
  for (const auto& [file, phrase] : cases) {
    INFO(file);
    std::vector<char> bytes = read_all(std::filesystem::path(tp::test::source_dir()) / "tests/fuzz/corpus/checkpoint" / file);
    REQUIRE(bytes.size() > 1);
    bytes.erase(bytes.begin());
    try {
      (void)read_checkpoint(bytes, "forged.pt");
      FAIL("a forged checkpoint loaded");
    } catch (const CheckpointError& e) {
      const std::string message = e.what();
      CHECK(message.find("checkpoint forged.pt is damaged: ") == 0);
      CHECK(message.find(phrase) != std::string::npos);
    }
  }
}

TEST_CASE("the resume point skips a damaged last.pt and every name hard-linked to it") {
  const auto dir = test::fresh_dir("seal_fallback");
  save_at(dir / "step-00000010.pt", 10);
  save_at(dir / "last.pt", 20);
  REQUIRE(::link((dir / "last.pt").c_str(), (dir / "step-00000020.pt").c_str()) == 0);
  REQUIRE(::link((dir / "last.pt").c_str(), (dir / "best-step-00000020.pt").c_str()) == 0);
  std::vector<std::string> log;
  auto warn = [&](const std::string& line) { log.push_back(line); };

  auto point = CheckpointManager::find_resume_point(dir, warn);
  REQUIRE(point);
  CHECK(point->path.filename() == "last.pt");
  CHECK(point->checkpoint.step == 20);
  CHECK(point->skipped == 0);
  CHECK(log.empty());

  // Flip one byte of the shared inode: last.pt, step-20 and best-step-20 are all damaged now.
  std::vector<char> bytes = read_all(dir / "last.pt");
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  {
    std::fstream file(dir / "last.pt", std::ios::binary | std::ios::in | std::ios::out);
    file.seekp(static_cast<std::streamoff>(bytes.size() / 2));
    file.write(&bytes[bytes.size() / 2], 1);
  }
  point = CheckpointManager::find_resume_point(dir, warn);
  REQUIRE(point);
  CHECK(point->path.filename() == "step-00000010.pt");
  CHECK(point->checkpoint.step == 10);
  CHECK(point->skipped == 3);
  std::string all;
  for (const auto& line : log) all += line + "\n";
  INFO(all);
  REQUIRE(log.size() == 3);
  CHECK(contains(log[0], "last.pt"));
  CHECK(contains(log[0], "CRC-32C"));
  CHECK(contains(all, "step-00000020.pt: it is the same file as"));
  CHECK(contains(all, "best-step-00000020.pt: it is the same file as"));

  // Nothing loads: an error listing every file, exit code 4.
  write_all(dir / "step-00000010.pt", {'P', 'K'});
  const std::string message = checkpoint_error([&] { CheckpointManager::find_resume_point(dir, warn); });
  CHECK(contains(message, "no checkpoint"));
  CHECK(contains(message, "step-00000010.pt"));
  CHECK(contains(message, "last.pt"));

  // No checkpoint at all: start fresh.
  CHECK_FALSE(CheckpointManager::find_resume_point(test::fresh_dir("seal_empty"), warn));
}

}  // namespace

TEST_CASE("an export handed over as a checkpoint is named as one, not as a damaged checkpoint") {
  // Deployment trial F10: `host predict --checkpoint model.safetensors` said "damaged ... truncated".
  const auto dir = test::fresh_dir("seal_export");
  std::string header = R"({"__metadata__":{"torchhost.model":"{}"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<char> bytes(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), 4, '\0');
  write_all(dir / "model.safetensors", bytes);
  const std::string message = checkpoint_error([&] { load_checkpoint(dir / "model.safetensors"); });
  INFO(message);
  CHECK(contains(message, (dir / "model.safetensors").string() + " is a safetensors file"));
  CHECK(contains(message, "not a checkpoint"));
  CHECK(contains(message, "inference library"));
  CHECK(contains(message, "train.init_weights"));
  CHECK(!contains(message, "damaged"));
  // Cut inside its header, it is no safetensors file any more: a damaged file, as before.
  bytes.resize(20);
  write_all(dir / "cut.safetensors", bytes);
  CHECK(contains(checkpoint_error([&] { load_checkpoint(dir / "cut.safetensors"); }), "damaged"));
}
