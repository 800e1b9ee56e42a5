// image_folder's classes, counted (data trials F3 and F4): a val_split on long-tailed data left
// rare classes without val images, silently, or without training images under a warning that
// said to remove an "empty" folder; nothing showed the images per class or the loss weights.
// The stratified val_split against scikit-learn's train_test_split(stratify=y) counts, the
// plain split unchanged, the warnings naming the classes, the compact counts line and
// compute_class_weight("balanced"). Pure functions: well under a second.
#include <algorithm>
#include <string>
#include <vector>

#include "class_split.h"
#include "image_listing.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/random.h"

#include <doctest/doctest.h>

namespace {

namespace ifo = tp::image_folder;

/// Classes c0, c1, ... with `counts[c]` images each, listed class by class as a folder scan lists them.
ifo::Listing long_tail(const std::vector<std::size_t>& counts) {
  ifo::Listing listing;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    listing.classes.push_back("c" + std::to_string(c));
    for (std::size_t i = 0; i < counts[c]; ++i) {
      listing.paths.push_back("c" + std::to_string(c) + "/" + std::to_string(i) + ".jpg");
      listing.labels.push_back(static_cast<int64_t>(c));
    }
  }
  return listing;
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("val_split_stratified: scikit-learn's per-class counts, the same split for the same seed") {
  // The reference, scikit-learn 1.9.1 (no tied remainders in these cases, where it draws):
  //   y = np.repeat(np.arange(6), [50, 23, 11, 7, 4, 2])
  //   tr, te = train_test_split(np.arange(97), test_size=f, stratify=y, random_state=0)
  //   np.bincount(y[te])  ->  0.2: [10, 5, 2, 2, 1, 0]; 0.3: [16, 7, 3, 2, 1, 1]; 0.6: [30, 14, 7, 4, 3, 1]
  const ifo::Listing all = long_tail({50, 23, 11, 7, 4, 2});
  const std::vector<std::pair<double, std::vector<std::size_t>>> expected{
      {0.2, {10, 5, 2, 2, 1, 0}}, {0.3, {16, 7, 3, 2, 1, 1}}, {0.6, {30, 14, 7, 4, 3, 1}}};
  for (const auto& [fraction, val_counts] : expected) {
    CAPTURE(fraction);
    const auto [train, val] = ifo::split_listing(all, fraction, 42, /*stratified=*/true);
    CHECK(ifo::class_counts(val) == val_counts);
    CHECK(train.paths.size() + val.paths.size() == all.paths.size());
    // The same seed, the same files; another seed, other files of the same counts.
    CHECK(ifo::split_listing(all, fraction, 42, true).second.paths == val.paths);
    const ifo::Listing other = ifo::split_listing(all, fraction, 7, true).second;
    CHECK(ifo::class_counts(other) == val_counts);
    CHECK(other.paths != val.paths);
  }
  // A class's val images are its first in the plain split's permutation (PLG-8: one seeded rule).
  const std::vector<bool> held = ifo::stratified_holdout(all.labels, 6, 0.3, 42);
  std::vector<std::size_t> perm(all.paths.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  tp::cpp::SplitMix64 rng(42);
  for (std::size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  std::vector<bool> seen_train(6, false);
  for (const std::size_t i : perm) {
    const auto c = static_cast<std::size_t>(all.labels[i]);
    if (!held[i]) seen_train[c] = true;
    CHECK_MESSAGE(!(held[i] && seen_train[c]), "a val image after a training image of its class in the permutation");
  }
  // The default stays the plain seeded holdout: existing splits do not move.
  const auto plain = ifo::split_listing(all, 0.3, 42);
  const std::vector<bool> before = tp::cpp::seeded_holdout(all.paths.size(), 0.3, 42, "image_folder", "images");
  std::vector<std::string> plain_val;
  for (std::size_t i = 0; i < before.size(); ++i)
    if (before[i]) plain_val.push_back(all.paths[i]);
  CHECK(plain.second.paths == plain_val);
  // Multi-label listings have no one class to stratify by.
  ifo::Listing multi = all;
  multi.label_sets.assign(multi.labels.size(), {0});
  multi.labels.clear();
  CHECK_THROWS_WITH_AS(ifo::split_listing(multi, 0.3, 42, true), doctest::Contains("multi-label"), tp::cpp::Failure);
}

TEST_CASE("val_split: the classes left without a val or a training image are named, with val_split as the cause") {
  // Before: no word for the classes without a val image; "Remove the empty class folder" for
  // those without a training image, whose folders were not empty.
  const ifo::Listing all = long_tail({60, 30, 3, 2, 1, 0});
  const auto [train, val] = ifo::split_listing(all, 0.2, 0);
  const std::vector<std::size_t> val_counts = ifo::class_counts(val);
  std::vector<std::string> no_val;
  for (std::size_t c = 0; c < 5; ++c)
    if (val_counts[c] == 0) no_val.push_back("'c" + std::to_string(c) + "'");
  REQUIRE(!no_val.empty());  // 3 of the 6 images of the three rarest classes: some get none
  CHECK(mentions(val.warnings, std::to_string(no_val.size()) + " of 6 classes got no val image from val_split = 0.2 ("));
  for (const std::string& name : no_val) CHECK(mentions(val.warnings, name));
  CHECK(mentions(val.warnings, "set val_split_stratified = true"));
  CHECK(!mentions(val.warnings, "'c5'"));  // the empty folder is the training split's warning
  CHECK(train.split_totals == std::vector<std::size_t>{60, 30, 3, 2, 1, 0});

  const auto [small_train, big_val] = ifo::split_listing(all, 0.9, 0);
  const std::vector<std::size_t> train_counts = ifo::class_counts(small_train);
  std::size_t without = 0;
  for (std::size_t c = 0; c < 5; ++c) without += train_counts[c] == 0 ? 1 : 0;
  REQUIRE(without > 0);
  CHECK(mentions(small_train.warnings, std::to_string(without) + " of 6 classes got no training image: val_split = 0.9 "
                                                                 "held out all their images ("));
  CHECK(mentions(small_train.warnings, "lower val_split"));
  CHECK(!mentions(small_train.warnings, "Remove the empty class folder"));
}

TEST_CASE("images per class in one line; class_weights as compute_class_weight(\"balanced\") above 3:1") {
  CHECK(ifo::class_counts_text({"bird", "cat", "dog"}, {3, 3, 0}) == "images per class: bird 3, cat 3, dog 0");
  std::vector<std::string> names;
  std::vector<std::size_t> counts;
  for (std::size_t c = 0; c < 25; ++c) {
    names.push_back("k" + std::to_string(c));
    counts.push_back(10 + c);
  }
  counts[7] = 2;
  counts[3] = 500;
  CHECK(ifo::class_counts_text(names, counts) ==
        "images per class: smallest k7 2, k0 10, k1 11; largest k3 500, k24 34, k23 33");
  // compute_class_weight("balanced", classes=np.arange(3), y=np.repeat(np.arange(3), [200, 3, 50]))
  //   -> [0.4216666666666667, 28.11111111111111, 1.6866666666666668]
  const std::string line = ifo::class_weights_line({200, 3, 50});
  CHECK(line.find("class_weights = [0.421667, 28.1111, 1.68667]") != std::string::npos);
  CHECK(line.find("66.7 to 1") != std::string::npos);
  // A class without a training image weighs 0; n_classes counts the classes with images.
  CHECK(ifo::class_weights_line({200, 0, 50}).find("class_weights = [0.625, 0, 2.5]") != std::string::npos);
  CHECK(ifo::class_weights_line({30, 10, 20}).empty());  // 3:1 is not above the ratio
  CHECK(ifo::class_weights_line({5}).empty());
}
