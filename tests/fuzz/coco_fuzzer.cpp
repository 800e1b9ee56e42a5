// Fuzz target: coco_detection's reader of COCO instances JSON (read_coco), the file that decides
// which images a dataset opens and which boxes and labels it serves. Every input must give a split
// or a tp::cpp::Failure, never another exception; a split must be consistent (images in ascending
// id, every image's objects inside the object list, no more objects counted than held, a label
// for each);
// a violation traps, as does a crash or a sanitizer report. Each input is read twice: as given,
// and with contiguous labels and skip_empty (whose "no image left" is a Failure too).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "coco_annotations.h"
#include "tp/cpp/guard.h"

namespace {

void check_split(const tp::coco_detection::CocoSplit& split, bool contiguous) {
  uint64_t counted = 0;
  for (std::size_t i = 0; i < split.images.size(); ++i) {
    const auto& image = split.images[i];
    if (i > 0 && split.images[i - 1].id >= image.id) __builtin_trap();
    if (uint64_t{image.first_object} + image.object_count > split.objects.size()) __builtin_trap();
    counted += image.object_count;
  }
  // skip_empty drops images, not the objects list they index into: no more objects counted than held.
  if (counted > split.objects.size()) __builtin_trap();
  for (const auto& object : split.objects) {
    if (!(object.w >= 0.f) || !(object.h >= 0.f)) __builtin_trap();
    if (contiguous && (object.label < 0 || object.label >= static_cast<int64_t>(split.category_ids.size())))
      __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: the input is a memory file, named through /proc.
  static const int fd = ::memfd_create("coco_fuzzer", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) __builtin_trap();
  if (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) __builtin_trap();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  for (const bool variant : {false, true}) {
    tp::coco_detection::CocoReadOptions options;
    options.contiguous_labels = variant;
    options.skip_empty = variant;
    try {
      check_split(tp::coco_detection::read_coco(path, "annotations", options), variant);
    } catch (const tp::cpp::Failure&) {
      // a refused file: fine
    }
  }
  return 0;
}
