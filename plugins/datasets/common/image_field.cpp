#include "image_field.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rng.h"

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

/// The views' field names: fields cross the ABI by name, which must outlive the sample.
constexpr std::array<const char*, kMaxViews> kViewNames{
    "image_0", "image_1", "image_2",  "image_3",  "image_4",  "image_5",  "image_6",  "image_7",
    "image_8", "image_9", "image_10", "image_11", "image_12", "image_13", "image_14", "image_15"};
constexpr std::array<const char*, kMaxViews> kLocalNames{
    "local_0", "local_1", "local_2",  "local_3",  "local_4",  "local_5",  "local_6",  "local_7",
    "local_8", "local_9", "local_10", "local_11", "local_12", "local_13", "local_14", "local_15"};

}  // namespace

uint64_t view_seed(uint64_t seed, int index) { return Rng(seed, 0x100U + static_cast<uint64_t>(index)).next(); }

void add_image_views(tp::cpp::Sample& out, const std::vector<unsigned char>& bytes, const std::string& name,
                     const TransformOptions& o, uint64_t seed) {
  for (int k = 0; k < o.views; ++k)
    out.add(make_image_field(transform_image(bytes, name, o, view_seed(seed, k)), o.channels_last,
                             kViewNames[static_cast<std::size_t>(k)]));
  TransformOptions local = o;
  local.random_resized_crop = o.local_crop;
  local.scale = o.local_scale;
  for (int k = 0; k < o.local_views; ++k)
    out.add(make_image_field(transform_image(bytes, name, local, view_seed(seed, kMaxViews + k)), o.channels_last,
                             kLocalNames[static_cast<std::size_t>(k)]));
}

tp_field_t make_image_field(Image&& image, bool channels_last, const char* name) {
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
  return tp_field_t{name, &owned.release()->managed};
}

void add_encoded_image(tp::cpp::Sample& out, std::vector<unsigned char>&& bytes, const ImageBox& box) {
  const auto n = static_cast<int64_t>(bytes.size());
  out.add("image", std::move(bytes), {n});
  const std::array<int32_t, 7> values = box.values();
  out.add("image_box", std::vector<int32_t>(values.begin(), values.end()), {7});
}

}  // namespace tp::datasets
