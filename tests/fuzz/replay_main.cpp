// Replays fuzz inputs through a harness without libFuzzer: `replay FILE_OR_DIR...`. The normal
// (gcc) test suite runs every checked-in corpus and crash regression input this way, so a fixed
// finding stays fixed even where clang's libFuzzer is not built. An input that runs longer than
// scripts/fuzz's `-timeout=10` fails the replay as it fails the fuzzer (a hang is a finding too;
// issue 58's shard pattern of a thousand `{x}` took 21 s); the checked-in inputs take milliseconds.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input files in the arguments\n");
    return 2;
  }
  constexpr std::chrono::seconds kFuzzerTimeout{10};
  int slow = 0;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto start = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const auto took = std::chrono::steady_clock::now() - start;
    if (took > kFuzzerTimeout) {
      std::fprintf(stderr, "replay: %s took %.1f s, past the fuzzers' %lld s timeout (a finding)\n",
                   file.c_str(), std::chrono::duration<double>(took).count(),
                   static_cast<long long>(kFuzzerTimeout.count()));
      ++slow;
    }
  }
  if (slow > 0) return 1;
  std::printf("replay: %zu inputs ran cleanly\n", files.size());
  return 0;
}
