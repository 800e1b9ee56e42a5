#include "dlpack_check.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tp::detail {
namespace {

constexpr uint64_t kLimit = uint64_t{1} << 62; // sizes and offsets beyond it wrap in signed arithmetic

}  // namespace

std::string dlpack_problem(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > kMaxDlpackDims)
    return "has ndim " + std::to_string(t.ndim) + " (0 to " + std::to_string(kMaxDlpackDims) + " dimensions)";
  if (t.ndim > 0 && t.shape == nullptr) return "has ndim " + std::to_string(t.ndim) + " and a NULL shape";
  if (t.device.device_type != kDLCPU) return "is not a CPU tensor (device type " + std::to_string(t.device.device_type) + ")";
  if (t.dtype.lanes != 1) return "has " + std::to_string(t.dtype.lanes) + " lanes (vector types are not supported)";
  if (t.dtype.bits == 0 || t.dtype.bits % 8 != 0) return "has an element width of " + std::to_string(t.dtype.bits) + " bits";
  for (int32_t d = 0; d < t.ndim; ++d)
    if (t.shape[d] < 0) return "has a negative size " + std::to_string(t.shape[d]) + " in dimension " + std::to_string(d);
  uint64_t elements = 1;
  uint64_t extent = 0; // the farthest element's index, in elements, under the strides
  for (int32_t d = 0; d < t.ndim; ++d) {
    const int64_t size = t.shape[d];
    if (size == 0) return ""; // no element: nothing is read
    if (elements > kLimit / static_cast<uint64_t>(size)) return "has more than 2^62 elements";
    elements *= static_cast<uint64_t>(size);
    if (t.strides != nullptr) {
      const int64_t stride = t.strides[d];
      const uint64_t step = stride < 0 ? 0 - static_cast<uint64_t>(stride) : static_cast<uint64_t>(stride);
      if (step != 0 && static_cast<uint64_t>(size - 1) > (kLimit - extent) / step)
        return "has strides that reach past 2^62 elements in dimension " + std::to_string(d);
      extent += step * static_cast<uint64_t>(size - 1);
    }
  }
  if (t.strides != nullptr) {
    // A field's strides can only be checked against its own elements (the host never learns the
    // allocation behind `data`): they must lay the elements out densely, a permutation of a
    // compact layout (channels-last included). A negative stride aborted the host inside
    // LibTorch; a stride past the elements read beyond the buffer.
    std::array<std::pair<int64_t, int64_t>, kMaxDlpackDims> by_stride{};  // (stride, size), sizes above 1
    int32_t n = 0;
    for (int32_t d = 0; d < t.ndim; ++d) {
      if (t.strides[d] < 0)
        return "has a negative stride " + std::to_string(t.strides[d]) + " in dimension " + std::to_string(d);
      if (t.shape[d] > 1) by_stride[n++] = {t.strides[d], t.shape[d]};
    }
    std::sort(by_stride.begin(), by_stride.begin() + n);
    int64_t dense = 1;
    for (int32_t k = 0; k < n; ++k) {
      if (by_stride[k].first != dense)
        return "has strides that do not lay its elements out densely (a stride of " +
               std::to_string(by_stride[k].first) + " where " + std::to_string(dense) +
               " was due): fields are compact or a permutation of compact (channels-last)";
      dense *= by_stride[k].second;
    }
  }
  if (t.data == nullptr) return "has a NULL data pointer and " + std::to_string(elements) + " elements";
  const uint64_t width = t.dtype.bits / 8;
  const uint64_t span = (t.strides != nullptr ? extent + 1 : elements);
  if (span > kLimit / width || t.byte_offset > kLimit - span * width)
    return "has a byte offset or size beyond 2^62 bytes";
  return "";
}

}  // namespace tp::detail
