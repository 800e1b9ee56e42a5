// Prediction files (`host predict --format csv|jsonl|npy`), written as records arrive, in the
// order they arrive, so a million samples need memory for one block only. The file grows under
// `<path>.<random>.partial-<pid>` (created exclusively, never through a link) and is fsynced and
// renamed to `path` by finish(): a crash, a kill or a power cut never leaves a truncated file
// under the final name (docs/predict.md).
//   csv    header `index,logits.0,...,logits.argmax,logits.class,logits.prob,label`; a column
//          with a per-sample shape is flattened row-major into `name.i` (`name.i.j` for 2-D);
//          `<name>.class` only with class names (set_class_names), `path` after `index` only with
//          the rows' files (set_row_paths); text quoted as CSV needs.
//   jsonl  one object per sample: {"index": 0, "logits": [..], "logits.argmax": 3, ...}; shaped
//          columns as nested arrays; NaN and infinities as null.
//   npy    one NumPy structured array of `rows` records (np.load(path)["logits"]): the records as
//          they are, with the header's row count written at finish().
//   png    a directory: `predictions.csv` (index and per-sample fields) and `<index>.png`, each
//          row's attachment (a sample's class map, PredictOptions::class_maps), and the marker
//          `.torchhost-predictions`; it grows under `<path>.<random>.partial-<pid>/` and is renamed as a whole.
// An existing `path` is replaced only when it is what this format writes: a regular file for
// csv, jsonl and npy; for png a directory holding the marker and nothing but predictions.csv and
// <n>.png. Anything else is refused before any sample is read (util/output_target.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tp/framework/engine/prediction_rows.h"

namespace tp {

class PredictionWriter {
 public:
  /// Opens `<path>.<random>.partial-<pid>` (created exclusively, never through a link) for `format` ("csv" | "jsonl" | "npy" | "png", a directory). Throws tp::Error naming the
  /// file when it cannot be created, ConfigError (on --output, exit 2) for an existing `path` this format
  /// may not replace, ConfigError for an unknown format.
  static std::unique_ptr<PredictionWriter> open(const std::filesystem::path& path, const std::string& format);
  /// Without finish() (an error on the way), removes the partial file: a failed prediction
  /// leaves nothing behind.
  virtual ~PredictionWriter();

  /// Appends `block`'s records. The first block fixes the columns; a later block with other
  /// columns throws tp::Error. Throws tp::Error naming the file on a write error (a full disk).
  void write(const RecordBlock& block);
  /// Flushes, completes the header (npy), fsyncs the file, renames it to its final name and
  /// fsyncs the directory. Throws tp::Error naming both files on failure. Without a
  /// block written, the file holds the header only (csv needs a schema: `schema` then).
  void finish(const PredictionSchema& schema);
  /// Records written so far.
  int64_t rows() const noexcept { return rows_; }
  /// The names of the classes (checkpoint or dataset, ABI 1.12): csv and jsonl (and png's
  /// predictions.csv) then write `<name>.class`, the name of `<name>.argmax`, right after it, for
  /// every output `<name>` of exactly names.size() columns (an output over another label set keeps
  /// its argmax alone). The npy writer holds numbers only and ignores them. Call before the first
  /// write().
  void set_class_names(std::vector<std::string> names) { class_names_ = std::move(names); }
  /// The files the rows were predicted from (host predict --images), by row index: csv and jsonl
  /// (and png's predictions.csv) then write `path`, paths[index], right after `index`; npy ignores
  /// them. Call before the first write().
  void set_row_paths(std::vector<std::string> paths) { row_paths_ = std::move(paths); }
  /// Whether this writer writes the `path` column (set_row_paths, a text format).
  bool names_paths() const noexcept { return writes_text_ && !row_paths_.empty(); }
  /// Whether column `column` of `schema` is an argmax this writer follows with `<name>.class`: an
  /// int64 scalar "<name>.argmax" whose output "<name>" has shape {C}, C the number of class names.
  bool names_classes(const PredictionSchema& schema, std::size_t column) const;

 protected:
  explicit PredictionWriter(std::filesystem::path path);
  /// A directory writer: `<path>.<random>.partial-<pid>/` is created new and put() writes its
  /// file `table`; finish() renames the directory, replacing an older `path` that a directory
  /// writer wrote (its marker and files; anything else was refused here, and is again at finish()).
  PredictionWriter(std::filesystem::path path, const std::string& table);
  /// Format hooks: the header once the schema is known, the records, the closing touches.
  virtual void write_header(const PredictionSchema& schema) = 0;
  virtual void write_records(const RecordBlock& block) = 0;
  virtual void complete(const PredictionSchema& schema) { (void)schema; }
  /// The path of row `index` (names_paths()); throws tp::Error for an index past the files.
  const std::string& row_path(int64_t index) const;
  /// The name of class `id` (an argmax of a column names_classes() accepts).
  const std::string& class_name(int64_t id) const {
    static const std::string kNone;  // argmax -1: the row's scores are not numbers (predictor.cpp)
    return id >= 0 && static_cast<std::size_t>(id) < class_names_.size() ? class_names_[static_cast<std::size_t>(id)]
                                                                         : kNone;
  }

  /// Writes `bytes` to the partial file; throws tp::Error naming it on failure.
  void put(const void* bytes, std::size_t size);
  void put(const std::string& text) { put(text.data(), text.size()); }
  /// Writes the file `name` with `bytes` into a directory writer's partial directory, fsynced.
  /// Throws tp::Error naming it on failure.
  void put_file(const std::string& name, const std::string& bytes);
  /// Writes `bytes` at absolute `offset` (the npy header's row count).
  void put_at(std::size_t offset, const std::string& text);

  std::filesystem::path path_, partial_;
  int64_t rows_ = 0;
  bool writes_text_ = true; ///< false for npy, whose records cannot hold a class name

 private:
  struct File;
  /// finish() of a directory writer: the partial directory becomes `path_`, and a previous output
  /// there (the marker and its files) is removed, nothing else.
  void replace_directory();
  /// Throws the write error `error` of the partial file (the destructor then removes it).
  [[noreturn]] void fail(int error) const;

  std::shared_ptr<File> file_;
  bool directory_ = false; ///< a directory writer (the png format)
  bool header_written_ = false;
  bool finished_ = false;
  PredictionSchema schema_;
  std::vector<std::string> class_names_;
  std::vector<std::string> row_paths_;
};

}  // namespace tp
