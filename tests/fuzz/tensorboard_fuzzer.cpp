// Fuzz target: what a resumed run does with the TensorBoard event files it finds in its run
// directory (TensorBoardWriter::resume -> resume_event_file): TFRecord framing, the event parse,
// and the rewrite. The first input byte is the resume step, the rest the file. It must never
// throw, and what it keeps must be well framed (split back whole) and, when nothing was dropped,
// the file itself; a violation traps, as does a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tp/framework/monitor/event_file_resume.h"
#include "tp/framework/monitor/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view file(reinterpret_cast<const char*>(data) + 1, size - 1);
  const tp::ResumedEventFile kept = tp::resume_event_file(file, data[0]);
  if (tp::split_tfrecords(kept.bytes).valid_bytes != kept.bytes.size()) __builtin_trap();
  if (!kept.changed && kept.bytes != file) __builtin_trap();
  return 0;
}
