// An image_folder split listed in a CSV file (`csv`, `val_csv`, `test_csv`): `path,label` rows
// read as CSV (quotes, a byte-order mark, a header by its column names), every listed file
// checked to exist at create, and the rows that would train wrongly without a word refused or
// warned of (data trial F6: pandas' quoted paths kept their quotes, Excel's byte-order mark made
// "label" a class, `filename,class` and extra columns shifted every class id).
#pragma once

#include <string>

#include "image_listing.h"

namespace tp::image_folder {

/// The header names read_csv_listing takes for the path column (any case)...
inline constexpr const char* kCsvPathNames[] = {"path", "file", "filename", "file_name", "filepath", "file_path",
                                                "image", "image_path", "img", "img_path"};
/// ... and for the label column.
inline constexpr const char* kCsvLabelNames[] = {"label", "class", "class_name", "classname", "target", "category",
                                                 "labels", "tags"};

/// Reads a CSV listing: records of exactly two fields, `path,label` (tp::datasets::CsvReader:
/// RFC 4180 quotes, so a path may hold a comma or a quote; a UTF-8 byte-order mark dropped; CRLF;
/// blank lines and lines starting with '#' skipped). A first row whose two cells are a path name
/// and a label name (kCsvPathNames, kCsvLabelNames, any case, in either order) is a header that
/// says which column is which. Paths are resolved against `base_dir`; one that is absolute or
/// climbs out of `base_dir` with '..' (escapes_root: lexically, a symlink inside is the user's
/// choice) is refused naming the file, the line and the path unless `allow_outside_root`. Labels
/// are either all integers (used as class ids; classes are named "0".."max") or all names (ids
/// by sorted name). Every listed file is checked to exist (one stat per row): listed files that do
/// not are an error (TP_ERR_IO) naming how many and the first few with their lines, at create
/// rather than as bad samples an epoch later. Throws tp::cpp::Failure (TP_ERR_CONFIG) naming the
/// file and line on a row of another number of fields, an empty path or label, a label of the
/// other kind, or a path listed again with another label. Into Listing::warnings: paths listed
/// more than once with the same label (once, with the count), and class names that differ only by
/// case ('Cat' and 'cat'). With a `label_separator` (`multi_label = true`) a label cell lists any
/// number of labels, split at it, spaces around each trimmed, repeats dropped, and may be empty
/// (an image with none); Listing::label_sets then holds each row's ids and Listing::labels is
/// empty. The classes are the labels of every row, integers or names as above; a path listed
/// again must list the same set.
Listing read_csv_listing(const std::string& csv_path, const std::string& base_dir, bool allow_outside_root = false,
                         const std::string& label_separator = "");

}  // namespace tp::image_folder
