// `host predict --images DIR|LIST` (docs/predict.md, "New images"): the files to predict, in row
// order, and the run's evaluation table pointed at them, so that they are read with exactly the
// preprocessing `--split val` applies and without labels.
#pragma once

#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/registry.h"

namespace tp::cli {

/// The files of --images, one per prediction row, in row order.
struct ImageFiles {
  std::vector<std::string> shown;  ///< the `path` column: a LIST's line as written, a DIR's file relative to DIR
  std::vector<std::string> opened; ///< what the dataset reads: `shown` made absolute from the list's directory or DIR
  /// A DIR's entries the walk passed over (other endings, links that lead nowhere, linked
  /// directories), as one warning line; "" when none or for a list.
  std::string left_out;
};

/// The files `source` names. A directory: its regular files (symlinks to files included) whose
/// names end with one of `extensions` in any case (none when it is empty), in every sub-directory
/// (symlinked directories are not entered), sorted by their path relative to `source` in byte
/// order. A file whose first bytes are a JPEG's, PNG's, BMP's or WebP's: that one image, `shown`
/// as given. Another file: a list, one path per line, relative paths from the list's directory, leading and
/// trailing white space trimmed, blank lines and lines starting with '#' skipped, in its order.
/// Throws ConfigError on --images (exit 2) when `source` is missing or unreadable, a directory
/// holds no such file, a list names no file, or a listed path is missing or not a regular file
/// (naming the list's line).
ImageFiles list_image_files(const std::string& source, const std::vector<std::string>& extensions);

/// The `extensions` of the run's evaluation table (dataset_table(config, "val")) when its dataset
/// declares that string-array key; else image_folder's default endings (.jpg .jpeg .png .bmp .webp).
/// Throws ConfigError (exit 2) when the run has no evaluation table or its dataset cannot read
/// given files (its schema declares no `files` string array), naming the table and the component.
std::vector<std::string> image_extensions(const RunConfig& config, const Registry& registry);

/// The evaluation table (data.val, or a copy of data.train under data.val_from_train, its key path
/// kept for messages) with `files` = `files.opened`: as the val split's table (RunRequest::val_table)
/// the dataset reads those files, in that order, with its evaluation transform and no labels.
/// Call image_extensions() first (it refuses a dataset without `files`).
ComponentConfig val_table_reading(const RunConfig& config, const ImageFiles& files);

}  // namespace tp::cli
