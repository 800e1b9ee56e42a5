#include "decode_limit.h"

namespace tp::infer::detail {

void lower_decode_limit(ComponentConfig& dataset, int64_t limit) {
  const auto* exported = dataset.options.get_as<int64_t>("max_image_pixels");
  if (exported == nullptr || limit <= 0) return;
  if (exported->get() <= 0 || limit < exported->get()) dataset.options.insert_or_assign("max_image_pixels", limit);
}

std::string library_decode_advice(std::string message) {
  // The datasets' words (plugins/datasets/common/image_file.cpp, refuse_oversized).
  const std::string key = "more than max_image_pixels = ";
  const std::string advice = "raise max_image_pixels (0: no limit) if the image is real";
  const std::size_t at_key = message.find(key), at_advice = message.find(advice);
  if (at_key == std::string::npos || at_advice == std::string::npos) return message;
  message.replace(at_advice, advice.size(),
                  "raise the limit if the image is real: OpenOptions::max_image_pixels (C: "
                  "tp_infer_set_max_image_pixels) up to the export's own limit (the max_image_pixels of "
                  "its torchhost.preprocessing), or export a run trained with a higher one");
  message.replace(at_key, key.size(), "more than the pixel limit ");
  return message;
}

}  // namespace tp::infer::detail
