#include "class_split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include "tp/cpp/guard.h"
#include "tp/cpp/random.h"

namespace tp::image_folder {
namespace {

using tp::cpp::Failure;

// "'mole' (3 images), '_under' (3 images)": up to 10 of `ids`, then "...".
std::string named_classes(const std::vector<std::size_t>& ids, const std::vector<std::string>& classes,
                          const std::vector<std::size_t>& totals) {
  std::string text;
  for (std::size_t i = 0; i < ids.size() && i < 10; ++i)
    text += (i == 0 ? "'" : ", '") + classes[ids[i]] + "' (" + std::to_string(totals[ids[i]]) +
            (totals[ids[i]] == 1 ? " image)" : " images)");
  return text + (ids.size() > 10 ? ", ..." : "");
}

// "0.2" rather than "0.200000".
std::string fraction_text(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", fraction);
  return text;
}

}  // namespace

std::vector<std::size_t> class_counts(const Listing& listing) {
  std::vector<std::size_t> counts(listing.classes.size(), 0);
  const auto add = [&](int64_t label) {
    if (label >= 0 && static_cast<std::size_t>(label) < counts.size()) ++counts[static_cast<std::size_t>(label)];
  };
  for (const int64_t label : listing.labels) add(label);
  for (const std::vector<int64_t>& set : listing.label_sets)
    for (const int64_t label : set) add(label);
  return counts;
}

std::vector<bool> stratified_holdout(const std::vector<int64_t>& labels, std::size_t classes, double fraction,
                                     uint64_t seed) {
  const std::size_t n = labels.size();
  // scikit-learn's float test_size: ceil(test_size * n_samples), in doubles as numpy computes it.
  const auto k = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(n)));
  if (k == 0 || k >= n)
    throw Failure(TP_ERR_CONFIG, "image_folder: val_split = " + fraction_text(fraction) + " of " + std::to_string(n) +
                                     " images leaves an empty train or val split");
  std::vector<std::size_t> counts(classes, 0);
  for (const int64_t label : labels) ++counts[static_cast<std::size_t>(label)];
  // Each class's training share: floor(count * n_train / n), then one more for the classes with
  // the largest remainders until n_train are given (_approximate_mode). Integers: no rounding.
  const std::size_t n_train = n - k;
  std::vector<std::size_t> train(classes), remainder(classes), order(classes);
  std::size_t given = 0;
  for (std::size_t c = 0; c < classes; ++c) {
    train[c] = counts[c] * n_train / n;
    remainder[c] = counts[c] * n_train % n;
    given += train[c];
  }
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t i = 0; given < n_train; ++i, ++given) ++train[order[i]];
  // The plain val_split's permutation (tp::cpp::seeded_holdout): a class's val images are its
  // first ones in it.
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  tp::cpp::SplitMix64 rng(seed);
  for (std::size_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  std::vector<std::size_t> taken(classes, 0);
  std::vector<bool> held_out(n, false);
  for (const std::size_t i : perm) {
    const auto c = static_cast<std::size_t>(labels[i]);
    if (taken[c] < counts[c] - train[c]) {
      held_out[i] = true;
      ++taken[c];
    }
  }
  return held_out;
}

void warn_split_classes(const std::vector<std::size_t>& totals, const std::vector<std::size_t>& train,
                        const std::vector<std::size_t>& val, double fraction, bool stratified, Listing& train_part,
                        Listing& val_part) {
  std::vector<std::size_t> no_val, no_train;
  for (std::size_t c = 0; c < totals.size(); ++c) {
    if (totals[c] == 0) continue;  // an empty folder: the training split's own warning names it
    if (val[c] == 0) no_val.push_back(c);
    if (train[c] == 0) no_train.push_back(c);
  }
  const std::string of = " of " + std::to_string(totals.size()) + " classes";
  const std::string split = "val_split = " + fraction_text(fraction) + (stratified ? " (stratified)" : "");
  const std::string cure =
      stratified ? "give the split a held-out val_root or val_csv, or add images to these classes"
                 : "set val_split_stratified = true (each class holds out its own share, as scikit-learn's "
                   "train_test_split(stratify=y)), or give a held-out val_root or val_csv";
  if (!no_val.empty())
    val_part.warnings.push_back(std::to_string(no_val.size()) + of + " got no val image from " + split + " (" +
                                named_classes(no_val, train_part.classes, totals) +
                                "): they are never evaluated, and per-class means (val/mean_accuracy) leave them "
                                "out; " + cure);
  if (!no_train.empty())
    train_part.warnings.push_back(std::to_string(no_train.size()) + of + " got no training image: " + split +
                                  " held out all their images (" + named_classes(no_train, train_part.classes, totals) +
                                  "), so the model learns classes it never sees; lower val_split, or " + cure);
}

std::string class_counts_text(const std::vector<std::string>& classes, const std::vector<std::size_t>& counts) {
  if (counts.empty()) return "";
  const auto entry = [&](std::size_t c) { return classes[c] + " " + std::to_string(counts[c]); };
  std::string text = "images per class: ";
  if (counts.size() <= 20) {
    for (std::size_t c = 0; c < counts.size(); ++c) text += (c == 0 ? "" : ", ") + entry(c);
    return text;
  }
  std::vector<std::size_t> order(counts.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return counts[a] < counts[b]; });
  text += "smallest ";
  for (std::size_t i = 0; i < 3; ++i) text += (i == 0 ? "" : ", ") + entry(order[i]);
  text += "; largest ";
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return counts[a] > counts[b]; });
  for (std::size_t i = 0; i < 3; ++i) text += (i == 0 ? "" : ", ") + entry(order[i]);
  return text;
}

std::string class_weights_line(const std::vector<std::size_t>& counts) {
  std::size_t largest = 0, smallest = 0, present = 0, samples = 0;
  for (const std::size_t count : counts) {
    if (count == 0) continue;
    largest = std::max(largest, count);
    smallest = smallest == 0 ? count : std::min(smallest, count);
    ++present;
    samples += count;
  }
  if (present < 2 || static_cast<double>(largest) <= kImbalanceRatio * static_cast<double>(smallest)) return "";
  std::string list;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    char weight[32];
    const double w = counts[c] == 0 ? 0.0
                                    : static_cast<double>(samples) /
                                          (static_cast<double>(present) * static_cast<double>(counts[c]));
    std::snprintf(weight, sizeof weight, "%.6g", w);
    list += (c == 0 ? "" : ", ") + std::string(weight);
  }
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3g", static_cast<double>(largest) / static_cast<double>(smallest));
  return "the classes are imbalanced (the largest has " + std::to_string(largest) + " images, the smallest " +
         std::to_string(smallest) + ": " + ratio + " to 1, above 3). To weigh each class's loss by scikit-learn's " +
         "compute_class_weight(\"balanced\") (n_samples / (n_classes * count), in label-id order; 0 for a class "
         "without a training image), put in the loss's table (org.torchhost.cross_entropy): class_weights = [" +
         list + "]";
}

}  // namespace tp::image_folder
