// Fuzz target: the checkpoint reader behind --resume, `host eval` and `host export`. Every input
// must load or throw tp::CheckpointError; any other exception, a crash or a sanitizer report is
// a finding.
//
// The first input byte picks the layer under test. Even: the bytes go in as they are, so the
// fuzzer works on the integrity layer (seal, zip bounds), which random bytes almost never pass.
// Odd: the harness seals the remaining bytes first when they end like a zip archive, as the
// writer does, so mutations get past the checksum to the zip bounds checks, LibTorch's zip reader
// and unpickler, and our field checks. A crash inside LibTorch itself is LibTorch's bug: it is
// noted in docs/hardening.md and guarded against where our checks can (size, structure).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/checkpoint/checkpoint_seal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<char> bytes(reinterpret_cast<const char*>(data) + 1, reinterpret_cast<const char*>(data) + size);
  if ((data[0] & 1) != 0) {
    try {
      tp::seal_checkpoint(bytes);
    } catch (const tp::Error&) {
      // Not shaped like a zip archive's end: fed unsealed.
    }
  }
  try {
    (void)tp::read_checkpoint(bytes, "fuzz.pt");
  } catch (const tp::CheckpointError&) {
    // The one expected way to reject a file.
  }
  return 0;
}
