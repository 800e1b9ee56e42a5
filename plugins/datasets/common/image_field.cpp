#include "image_field.h"

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace tp::datasets {
namespace {

/// A DLPack [3, h, w] float tensor owning `pixels`; shape and strides live beside it.
struct OwnedImage {
  DLManagedTensor managed{};
  std::vector<float> pixels;
  int64_t shape[3];
  int64_t strides[3];
};

void delete_owned_image(DLManagedTensor* t) { delete static_cast<OwnedImage*>(t->manager_ctx); }

}  // namespace

tp_field_t make_image_field(Image&& image, bool channels_last) {
  auto owned = std::make_unique<OwnedImage>();
  owned->pixels = std::move(image.pixels);
  owned->shape[0] = 3;
  owned->shape[1] = image.h;
  owned->shape[2] = image.w;
  owned->strides[0] = 1;
  owned->strides[1] = 3 * static_cast<int64_t>(image.w);
  owned->strides[2] = 3;
  DLTensor& t = owned->managed.dl_tensor;
  t.data = owned->pixels.data();
  t.device = {kDLCPU, 0};
  t.ndim = 3;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = owned->shape;
  t.strides = channels_last ? owned->strides : nullptr;
  t.byte_offset = 0;
  owned->managed.manager_ctx = owned.get();
  owned->managed.deleter = &delete_owned_image;
  return tp_field_t{"image", &owned.release()->managed};
}

void add_encoded_image(tp::cpp::Sample& out, std::vector<unsigned char>&& bytes, const ImageBox& box) {
  const auto n = static_cast<int64_t>(bytes.size());
  out.add("image", std::move(bytes), {n});
  const std::array<int32_t, 7> values = box.values();
  out.add("image_box", std::vector<int32_t>(values.begin(), values.end()), {7});
}

}  // namespace tp::datasets
