// Which files an image_folder split holds and their labels: a torchvision-ImageFolder-style scan
// of root/<class>/** (a CSV file of `path,label` rows: csv_listing.h), optionally cut into train
// and val by a seeded ratio. Pure file-system reads at create() time; the result is immutable afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tp::image_folder {

/// Files a scan left out because their ending is not in `extensions`, counted by ending: the
/// lower-cased extension with its dot (".heic"), or "(no ending)".
using EndingCounts = std::map<std::string, std::size_t>;

/// The files of one split, in sample order, with their class ids.
struct Listing {
  std::vector<std::string> paths;   ///< absolute or root-relative-resolved file paths
  std::vector<int64_t> labels;      ///< one per path, in [0, classes.size()); empty in a multi-label listing
  /// A multi-label CSV listing's (`multi_label = true`): each path's class ids, sorted, none
  /// repeated (none at all for an image without a label); empty otherwise.
  std::vector<std::vector<int64_t>> label_sets;
  std::vector<std::string> classes; ///< class names by id (folder names, or CSV label names)
  /// Links under root that lead back to a folder they are inside ("dog/loop/up" for up -> ..),
  /// not followed (folder_walk.h): the dataset warns naming them. Only a scan finds them.
  std::vector<std::string> loops;
  /// Per class id, the files of its folder whose ending is not in `extensions` (a scan only; the
  /// listing cache does not keep them, so prepare, which scans, reports them): torchvision's
  /// ImageFolder skips them too, but a .tif the user meant to train on must not vanish silently.
  std::vector<EndingCounts> unlisted;
  /// Folders at the root that are not classes (is_hidden_folder: ".ipynb_checkpoints",
  /// "__MACOSX"), by name, sorted: the dataset logs them in one info line. A scan only, as
  /// `unlisted`: prepare, which scans, logs them when the listing is cached.
  std::vector<std::string> skipped_folders;
  /// Warnings about the listing for the dataset to log once (a CSV's duplicate rows, class names
  /// that differ only by case: csv_listing.h).
  std::vector<std::string> warnings;
  /// A part of a val_split: per class id, its images before the split (both parts); empty
  /// otherwise. A class with none here but some there lost them to the split: it is not an empty
  /// folder, and the warning about it names val_split (split_listing), not the folder.
  std::vector<std::size_t> split_totals;
  bool from_cache = false;          ///< read from the listing cache instead of a scan (listing_of_split)
};

/// Whether a folder named `name` at an image_folder root is left out of the classes: a hidden
/// folder (its name begins with '.': Jupyter's .ipynb_checkpoints, .git, .DS_Store-style tool
/// folders) or "__MACOSX" (macOS's zip tool puts its AppleDouble copies there). As classes they
/// shifted every class id by one and trained a head for a class that is not one (data trial F9);
/// torchvision's ImageFolder refuses such a folder when it is empty, and timm makes classes only
/// of folders holding images.
bool is_hidden_folder(const std::string& name);

/// "'.ipynb_checkpoints', '__MACOSX'": the listing's skipped_folders quoted for a message (bytes
/// that are not UTF-8 shown as \xNN); "" when none.
std::string skipped_folders_text(const Listing& listing);

/// Scans `root`/<class>/ recursively (links to folders followed, except one that leads back to a
/// folder it is inside: Listing::loops; folder_walk.h) for files whose lower-cased name ends
/// with one of `extensions` (".jpg", ...). Classes are the sorted names of root's sub-folders
/// (byte order = code-point order for UTF-8, as Python's sorted(): folders named by numbers sort
/// as strings, "10" before "2", as torchvision's do), ids 0..C-1, leaving out hidden folders
/// (is_hidden_folder; named in Listing::skipped_folders); within a class, files are sorted by
/// (directory, name), as torchvision's make_dataset walks them. So sample i is the same file
/// torchvision.datasets.ImageFolder(root)[i] reads (with the same `extensions`: the default is
/// torchvision's IMG_EXTENSIONS, image_extensions.h; and no hidden folder, which torchvision
/// would take as a class or refuse when empty). The other files are counted
/// by ending in Listing::unlisted. Throws tp::cpp::Failure (TP_ERR_IO / TP_ERR_CONFIG) naming
/// `root` and the config key that gave it (`key`: "root", "val_root", "test_root") when it is
/// missing, cannot be read (nor a folder under it), has no class folder, or holds no image (then
/// naming the endings it did find). `walked`, when given, receives every
/// directory the scan read (root, the class folders and their sub-folders): what listing_cache.h
/// re-stats to tell whether a cached listing is stale.
Listing scan_folder(const std::string& root, const std::vector<std::string>& extensions,
                    std::vector<std::string>* walked = nullptr, const char* key = "root");

/// "3 files (.heic: 2, .txt: 1)": how many files `counts` holds and of which endings, the most
/// frequent first; "" when none.
std::string describe_endings(const EndingCounts& counts);

/// The one line naming the files every class folder of `listing` left out (Listing::unlisted),
/// for the dataset's log and `host shards write`; text "" when none. `images` is true when one
/// of their endings is an image format (.gif, .heic, .avif, .jxl, .pbm, ... or one the decoders
/// read): then the line is a warning, since images are being left out; else an info line (a
/// README.txt or .DS_Store beside the images is no news).
struct UnlistedNote {
  std::string text;
  bool images = false;
};
UnlistedNote unlisted_note(const Listing& listing);

/// Splits `all` into (train, val) by a seeded permutation (tp::cpp::seeded_holdout): val holds
/// round(n * val_fraction) samples chosen by a Fisher-Yates shuffle of 0..n-1 driven by
/// SplitMix64(seed); with `stratified`, each class holds out its own share instead
/// (class_split.h stratified_holdout: scikit-learn's counts, the same permutation). Both parts
/// keep their original relative order, and their warnings name the classes left without a val
/// or a training image (class_split.h warn_split_classes). Pure function of (all, val_fraction,
/// seed, stratified). `val_fraction` in (0, 1). Throws Failure when either part would be empty,
/// or for `stratified` with a multi-label listing (no one class to stratify by).
std::pair<Listing, Listing> split_listing(const Listing& all, double val_fraction, uint64_t seed,
                                          bool stratified = false);

}  // namespace tp::image_folder
