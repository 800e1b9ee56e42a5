// torchhost C++ helpers for Tier S plugin authors: owning DLPack tensors from std::vector.
//
// A dataset hands each field over as a DLManagedTensor whose deleter frees the buffer (PLG-9).
// make_field() moves a std::vector into such a tensor: no copy, and the deleter (code in this
// library) deletes it, so the host never frees plugin memory. Example:
//   std::vector<float> pixels(3 * 32 * 32);
//   out_fields[0] = tp::cpp::make_field("image", std::move(pixels), {3, 32, 32});
//   out_fields[1] = tp::cpp::make_field("label", std::vector<int64_t>{label}, {});
#ifndef TP_CPP_DLPACK_H
#define TP_CPP_DLPACK_H

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "tp/cpp/guard.h"
#include "tp/iface/dataset.h"

namespace tp::cpp {

namespace detail {
template <typename T>
constexpr DLDataType dl_dtype() {
  // Masks travel as uint8_t: kDLBool exists only since DLPack 0.8, and a host built against an
  // older LibTorch (whose bundled <ATen/dlpack.h> then defines the types) would refuse it.
  static_assert(!std::is_same_v<T, bool>, "use uint8_t for boolean fields");
  if constexpr (std::is_floating_point_v<T>) return {kDLFloat, static_cast<uint8_t>(sizeof(T) * 8), 1};
  else if constexpr (std::is_signed_v<T>) return {kDLInt, static_cast<uint8_t>(sizeof(T) * 8), 1};
  else return {kDLUInt, static_cast<uint8_t>(sizeof(T) * 8), 1};
}

template <typename T>
struct OwnedTensor {
  DLManagedTensor managed{};
  std::vector<T> data;
  std::vector<int64_t> shape;
};

template <typename T>
void delete_owned(DLManagedTensor* self) {
  delete static_cast<OwnedTensor<T>*>(self->manager_ctx);
}
}  // namespace detail

/// A new DLPack CPU tensor owning `data` (moved in), compact row-major with `shape`. The product
/// of `shape` must equal data.size() (throws Failure otherwise). Release with ->deleter(t).
template <typename T>
DLManagedTensor* make_dlpack(std::vector<T> data, std::vector<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (elements != static_cast<int64_t>(data.size()))
    throw Failure(TP_ERR_INVALID_ARGUMENT, "make_dlpack: shape does not match the data size");
  auto* owned = new detail::OwnedTensor<T>{};
  owned->data = std::move(data);
  owned->shape = std::move(shape);
  DLTensor& t = owned->managed.dl_tensor;
  t.data = owned->data.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(owned->shape.size());
  t.dtype = detail::dl_dtype<T>();
  t.shape = owned->shape.data();
  t.strides = nullptr; // compact
  t.byte_offset = 0;
  owned->managed.manager_ctx = owned;
  owned->managed.deleter = &detail::delete_owned<T>;
  return &owned->managed;
}

/// A field named `name` (static storage) holding make_dlpack(data, shape).
template <typename T>
tp_field_t make_field(const char* name, std::vector<T> data, std::vector<int64_t> shape) {
  return tp_field_t{name, make_dlpack(std::move(data), std::move(shape))};
}

/// Calls the deleter of every field in [fields, fields + count) and clears them. Used on error
/// paths so that no half-built sample leaks.
inline void release_fields(tp_field_t* fields, uint32_t count) noexcept {
  for (uint32_t i = 0; i < count; ++i) {
    if (fields[i].tensor != nullptr && fields[i].tensor->deleter != nullptr)
      fields[i].tensor->deleter(fields[i].tensor);
    fields[i].tensor = nullptr;
  }
}

}  // namespace tp::cpp

#endif  // TP_CPP_DLPACK_H
