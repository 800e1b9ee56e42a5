// The classes of a listing, counted: images per class, the stratified val_split (each class holds
// out its share, as scikit-learn's train_test_split(stratify=y)), the warnings about classes a
// val_split left without val or training images (data trial F3), the compact per-class line of
// the dataset's log and the loss weights for imbalanced classes (data trial F4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "image_listing.h"

namespace tp::image_folder {

/// Above this ratio of the largest class's images to the smallest non-empty class's, the
/// training split logs a `class_weights = [...]` line to paste (class_weights_line): the point
/// where plain cross-entropy visibly neglects the rare classes in practice; below it the line
/// would be noise on nearly balanced data (ImageNet's 732 to 1300 images a class is 1.8).
inline constexpr double kImbalanceRatio = 3.0;

/// Images per class id of `listing` (a multi-label image counts once for each of its labels).
std::vector<std::size_t> class_counts(const Listing& listing);

/// Which samples of `labels` (class ids in [0, classes)) val holds, stratified: scikit-learn's
/// StratifiedShuffleSplit counts, n_val = ceil(n * fraction) (its float test_size rule), each
/// class's training share by largest remainder (`_approximate_mode` of the counts for n - n_val;
/// ties to the lower class id where scikit-learn draws at random), the rest of the class to val.
/// Which images of a class: the first ones of that class in the seeded permutation that the
/// plain val_split uses (SplitMix64(seed) Fisher-Yates of 0..n-1), so the split is a pure
/// function of (labels, fraction, seed) (PLG-8). Throws Failure (TP_ERR_CONFIG) when either part
/// would be empty.
std::vector<bool> stratified_holdout(const std::vector<int64_t>& labels, std::size_t classes, double fraction,
                                     uint64_t seed);

/// The warnings about a val_split's parts, for the parts' Listing::warnings: the classes with
/// images that got no val image, and those that got no training image (val_split took them all;
/// not an empty folder). `totals`: the classes' images before the split; `train`, `val`: after.
/// Each names up to 10 classes with their images and says what to change.
void warn_split_classes(const std::vector<std::size_t>& totals, const std::vector<std::size_t>& train,
                        const std::vector<std::size_t>& val, double fraction, bool stratified, Listing& train_part,
                        Listing& val_part);

/// "images per class: bird 3, cat 3, dog 3" (up to 20 classes, in label-id order), or with more
/// "images per class: smallest mole 3, newt 3, _under 3; largest Zebra 200, apple 150, Äpfel 120":
/// the compact counts of the dataset's log line. "" when `counts` is empty.
std::string class_counts_text(const std::vector<std::string>& classes, const std::vector<std::size_t>& counts);

/// When the largest class has more than kImbalanceRatio times the images of the smallest
/// non-empty one: a line saying so, ending in `class_weights = [...]` to paste into the loss's
/// table, scikit-learn's compute_class_weight("balanced"): n_samples / (n_classes * count_c) over
/// the classes with images, in label-id order; a class without a training image gets 0 (it
/// weighs no training sample). "" otherwise.
std::string class_weights_line(const std::vector<std::size_t>& counts);

}  // namespace tp::image_folder
