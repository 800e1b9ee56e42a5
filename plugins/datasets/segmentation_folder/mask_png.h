// Segmentation masks from PNG files, read with libpng rather than OpenCV: OpenCV (4.6) expands a
// palette PNG to its colours (IMREAD_UNCHANGED gives BGR, IMREAD_GRAYSCALE the colours' luma), so
// the class indices a palette mask stores (Pascal VOC's SegmentationClass) cannot be had from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace tp::segmentation_folder {

/// How a mask file's pixels become class ids.
enum class MaskPixels {
  kIndex,  ///< palette PNG: its indices; greyscale PNG (1, 2, 4 or 8 bits): its values
  kColour, ///< any PNG expanded to 8-bit RGB (palette colours, grey as R = G = B), alpha dropped
};

/// Decodes the PNG `bytes` of the mask file `path`: kIndex gives CV_8UC1 class ids, kColour
/// CV_8UC3 in R, G, B order. Throws tp::cpp::Failure(TP_ERR_IO) naming `path` when it is not a
/// readable PNG, and Failure(TP_ERR_CONFIG) naming it for a kIndex read of an RGB(A) PNG (set
/// class_colors) or of a 16-bit one. Pure; [any] thread. Cost: one inflate of the file.
cv::Mat decode_mask_png(const std::vector<unsigned char>& bytes, MaskPixels pixels, const std::string& path);

/// An RGB -> class id table (config key class_colors: colour k is class k).
class ColourTable {
 public:
  /// `rgb`: 3 values per class, each in [0, 255]; throws Failure(TP_ERR_CONFIG) otherwise, or
  /// when two classes share a colour, or when there are more than 256 classes.
  explicit ColourTable(const std::vector<int64_t>& rgb);
  bool empty() const { return colours_.empty(); }
  /// `rgb` (CV_8UC3, R, G, B) as CV_8UC1 class ids. Throws Failure(TP_ERR_IO) naming `path`, the
  /// colour and its first pixel when a colour is not in the table.
  cv::Mat map(const cv::Mat& rgb, const std::string& path) const;

 private:
  std::vector<uint32_t> colours_;  // packed 0xRRGGBB, sorted
  std::vector<uint8_t> ids_;       // class id of colours_[k]
};

}  // namespace tp::segmentation_folder
