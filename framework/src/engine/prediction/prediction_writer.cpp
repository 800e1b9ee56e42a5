#include "tp/framework/engine/prediction_writer.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "number_text.h"
#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/output_target.h"
#include "tp/framework/util/stale_temporaries.h"
#include "tp/framework/util/utf8.h"
#include "tp/framework/util/write_error.h"

namespace tp {
namespace {

using detail::number_text;

// `<n>.png`: a class map a directory writer wrote.
bool class_map_output_file(const std::string& name) {
  if (name == "predictions.csv") return true;
  if (name.size() < 5 || !name.ends_with(".png")) return false;
  return name.find_first_not_of("0123456789") == name.size() - 4;
}

// Its marker is the one the sweep of stale temporaries requires before it removes a partial directory.
const OutputDirectoryKind kClassMapOutput{std::string(kPartialDirectoryMarker), "a `host predict --format png` output",
                                          &class_map_output_file};

// Value `i` of a column starting at `data`, as text.
std::string value_text(const PredictionColumn& c, const uint8_t* data, int64_t i, const char* non_finite_as) {
  switch (c.type) {
    case PredictionColumn::Type::kInt64: {
      int64_t v = 0;
      std::memcpy(&v, data + i * 8, 8);
      return number_text(v, non_finite_as);
    }
    case PredictionColumn::Type::kFloat32: {
      float v = 0;
      std::memcpy(&v, data + i * 4, 4);
      return number_text(v, non_finite_as);
    }
    case PredictionColumn::Type::kFloat64: {
      double v = 0;
      std::memcpy(&v, data + i * 8, 8);
      return number_text(v, non_finite_as);
    }
  }
  return "";
}

// `text` as one CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180; a
// file's path may hold any of them, a class name none of the breaks, class_names.h).
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// `text` as a JSON string; control characters (which a file's path may hold, a class name not)
// as \u00XX, and each byte of a path that is not UTF-8 (a Latin-1 name from an old archive) as
// \udcXX, Python's surrogateescape: json.loads reads the line, and os.fsencode of the string
// gives the file's bytes back (data trial F7: the raw byte made the line invalid JSON).
std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  const auto escape = [&](unsigned code) {
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04x", code);
    quoted += escaped;
  };
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    if (next_code_point(text, i) < 0) {
      escape(0xDC00U + static_cast<unsigned char>(text[i++]));
      continue;
    }
    const char c = text[at];
    if (i - at > 1) quoted.append(text, at, i - at);
    else if (static_cast<unsigned char>(c) < 0x20) escape(static_cast<unsigned char>(c));
    else quoted += (c == '"' || c == '\\') ? std::string{'\\', c} : std::string(1, c);
  }
  return quoted + "\"";
}

// The int64 at value 0 of a column at `data`.
int64_t first_int(const uint8_t* data) {
  int64_t v = 0;
  std::memcpy(&v, data, sizeof v);
  return v;
}

class CsvWriter : public PredictionWriter {
 public:
  using PredictionWriter::PredictionWriter;

 protected:
  void write_header(const PredictionSchema& schema) override {
    std::string line;
    for (std::size_t k = 0; k < schema.size(); ++k) {
      const PredictionColumn& c = schema[k];
      if (c.shape.empty()) {
        line += (line.empty() ? "" : ",") + c.name;
        if (k == 0 && names_paths()) line += ",path";
        if (names_classes(schema, k)) line += "," + c.name.substr(0, c.name.size() - 7) + ".class";
        continue;
      }
      for (int64_t i = 0; i < c.values(); ++i) {
        std::string name = c.name; // row-major multi-index: name.i.j
        int64_t rest = i, stride = c.values();
        for (int64_t size : c.shape) {
          stride /= size;
          name += "." + std::to_string(rest / stride);
          rest %= stride;
        }
        line += "," + name;
      }
    }
    put(line + "\n");
  }
  void write_records(const RecordBlock& block) override {
    const int64_t record = record_bytes(block.schema);
    std::string text;
    for (int64_t row = 0; row < block.rows; ++row) {
      const uint8_t* data = block.bytes.data() + row * record;
      bool first = true;
      for (std::size_t k = 0; k < block.schema.size(); ++k) {
        const PredictionColumn& c = block.schema[k];
        for (int64_t i = 0; i < c.values(); ++i) {
          text += first ? "" : ",";
          text += value_text(c, data, i, nullptr);
          first = false;
        }
        if (k == 0 && names_paths()) text += "," + csv_field(row_path(first_int(data)));
        if (names_classes(block.schema, k)) text += "," + csv_field(class_name(first_int(data)));
        data += c.bytes();
      }
      text += '\n';
    }
    put(text);
  }
};

// --format png: a directory holding `predictions.csv` (the index and the per-sample fields, as
// csv) and `<index>.png`, the class map of each sample (class_maps.h). The directory grows under
// `<path>.<random>.partial-<pid>` and is renamed by finish(), as a prediction file is.
class ClassMapWriter final : public CsvWriter {
 public:
  explicit ClassMapWriter(const std::filesystem::path& path) : CsvWriter(path, "predictions.csv") {}

 private:
  void write_records(const RecordBlock& block) override {
    CsvWriter::write_records(block);
    if (static_cast<int64_t>(block.attachments.size()) != block.rows)
      throw Error("predictions: " + std::to_string(block.attachments.size()) + " class maps for " +
                  std::to_string(block.rows) + " rows");
    const int64_t record = record_bytes(block.schema);
    for (int64_t row = 0; row < block.rows; ++row) {
      int64_t index = 0; // the first column of every record
      std::memcpy(&index, block.bytes.data() + row * record, sizeof index);
      put_file(std::to_string(index) + ".png", block.attachments[static_cast<std::size_t>(row)]);
    }
  }
};

class JsonlWriter final : public PredictionWriter {
 public:
  using PredictionWriter::PredictionWriter;

 private:
  void write_header(const PredictionSchema&) override {}
  // Nested arrays of `shape` from value `first` on.
  static void nest(std::string& text, const PredictionColumn& c, const uint8_t* data, std::size_t dim, int64_t& next) {
    if (dim == c.shape.size()) {
      text += value_text(c, data, next++, "null");
      return;
    }
    text += '[';
    for (int64_t i = 0; i < c.shape[dim]; ++i) {
      if (i) text += ',';
      nest(text, c, data, dim + 1, next);
    }
    text += ']';
  }
  void write_records(const RecordBlock& block) override {
    const int64_t record = record_bytes(block.schema);
    std::string text;
    for (int64_t row = 0; row < block.rows; ++row) {
      const uint8_t* data = block.bytes.data() + row * record;
      text += '{';
      for (std::size_t k = 0; k < block.schema.size(); ++k) {
        const PredictionColumn& c = block.schema[k];
        text += (k ? ",\"" : "\"") + c.name + "\":";
        int64_t next = 0;
        nest(text, c, data, 0, next);
        if (k == 0 && names_paths()) text += ",\"path\":" + json_string(row_path(first_int(data)));
        if (names_classes(block.schema, k))
          text += ",\"" + c.name.substr(0, c.name.size() - 7) + ".class\":" + json_string(class_name(first_int(data)));
        data += c.bytes();
      }
      // A model's ragged outputs (detections), already JSON members (predictor.h, json_rows).
      if (!block.attachments.empty() && !block.attachments[static_cast<std::size_t>(row)].empty())
        text += "," + block.attachments[static_cast<std::size_t>(row)];
      text += "}\n";
    }
    put(text);
  }
};

// NPY format 1.0 (numpy.lib.format): magic, version, uint16 header length, a Python dict literal
// padded with spaces to a multiple of 64 bytes, then the records. The row count is unknown until
// the end (skipped samples), so the shape is written with room for 20 digits and filled in by
// complete(); Python's literal parser allows the spaces inside the tuple.
class NpyWriter final : public PredictionWriter {
 public:
  // Records of numbers only: no class-name column.
  explicit NpyWriter(std::filesystem::path path) : PredictionWriter(std::move(path)) { writes_text_ = false; }

 private:
  static constexpr int kCountWidth = 20;
  static std::string descr(const PredictionSchema& schema) {
    std::string text = "[";
    for (const PredictionColumn& c : schema) {
      text += "('" + c.name + "', '" +
              (c.type == PredictionColumn::Type::kInt64 ? "<i8" : c.type == PredictionColumn::Type::kFloat32 ? "<f4" : "<f8") +
              "'";
      if (!c.shape.empty()) {
        text += ", (";
        for (int64_t size : c.shape) text += std::to_string(size) + ",";
        text += ")";
      }
      text += "), ";
    }
    return text + "]";
  }
  std::string header(const PredictionSchema& schema, int64_t rows) const {
    std::string count = std::to_string(rows);
    count.resize(kCountWidth, ' ');
    std::string dict = "{'descr': " + descr(schema) + ", 'fortran_order': False, 'shape': (" + count + ",), }";
    const std::size_t unpadded = 10 + dict.size() + 1; // magic 6, version 2, length 2, newline 1
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict += '\n';
    if (dict.size() > 65535) throw Error(partial_.string() + ": too many columns for an .npy header; use csv or jsonl.");
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>(dict.size() >> 8);
    return out + dict;
  }
  void write_header(const PredictionSchema& schema) override { put(header(schema, 0)); }
  void write_records(const RecordBlock& block) override { put(block.bytes.data(), block.bytes.size()); }
  void complete(const PredictionSchema& schema) override { put_at(0, header(schema, rows_)); }
};

}  // namespace

struct PredictionWriter::File {
  std::FILE* handle = nullptr;
  ~File() {
    if (handle != nullptr) std::fclose(handle);
  }
};

PredictionWriter::PredictionWriter(std::filesystem::path path, const std::string& table)
    : path_(std::move(path)),
      file_(std::make_shared<File>()),
      directory_(true) {
  previous_output_directory(path_, "--output", kClassMapOutput); // refused before any sample is read
  std::error_code error;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), error);
  if (error) throw Error("cannot create " + path_.parent_path().string() + ": " + error.message() + ". Check --output.");
  // A new directory under an unpredictable name: its files are then this user's alone to create.
  partial_ = create_exclusive_temporary_directory(path_, ".partial-").path;
  // The marker first: the sweep of a killed command's leftovers removes a partial directory only
  // when it holds the marker (or nothing), so one killed right after its table was created stayed.
  put_file(kClassMapOutput.marker, "Written by host predict --format png, which replaces this directory whole: "
                                   "predictions.csv and <index>.png. Files added here make it refuse to.\n");
  const std::filesystem::path table_path = partial_ / table;
  file_->handle = std::fopen(table_path.c_str(), "wb");
  if (file_->handle == nullptr)
    throw Error("cannot create " + table_path.string() + ": " + describe_write_error(errno) + " Check --output.");
  std::setvbuf(file_->handle, nullptr, _IOFBF, 1 << 20);
}

PredictionWriter::PredictionWriter(std::filesystem::path path)
    : path_(std::move(path)),
      file_(std::make_shared<File>()) {
  check_output_file(path_, "--output", "predictions");
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  // Created exclusively under an unpredictable name (never through a link planted in a shared
  // output directory); the pid it ends with lets the next command's sweep (util/stale_temporaries.h)
  // remove what a killed prediction left.
  const ExclusiveTemporary partial = create_exclusive_temporary(path_, ".partial-", /*hidden=*/false);
  partial_ = partial.path;
  file_->handle = ::fdopen(partial.fd, "wb");
  if (file_->handle == nullptr) {
    const int error = errno;
    ::close(partial.fd);
    throw Error("cannot create " + partial_.string() + ": " + describe_write_error(error) + " Check --output.");
  }
  std::setvbuf(file_->handle, nullptr, _IOFBF, 1 << 20);
}

PredictionWriter::~PredictionWriter() {
  if (finished_) return;
  file_.reset(); // closes the handle first
  std::error_code ignored;
  std::filesystem::remove_all(partial_, ignored);
}

std::unique_ptr<PredictionWriter> PredictionWriter::open(const std::filesystem::path& path, const std::string& format) {
  if (format == "csv") return std::unique_ptr<PredictionWriter>(new CsvWriter(path));
  if (format == "jsonl") return std::unique_ptr<PredictionWriter>(new JsonlWriter(path));
  if (format == "npy") return std::unique_ptr<PredictionWriter>(new NpyWriter(path));
  if (format == "png") return std::unique_ptr<PredictionWriter>(new ClassMapWriter(path));
  throw ConfigError("--format", "predictions: unknown format '" + format + "' (csv, jsonl, npy or png).");
}

void PredictionWriter::put(const void* bytes, std::size_t size) {
  if (size > 0 && std::fwrite(bytes, 1, size, file_->handle) != size) fail(errno);
}

void PredictionWriter::put_file(const std::string& name, const std::string& bytes) {
  const std::filesystem::path file = partial_ / name;
  // partial_ is this process's own new directory: no other user has put a link in it.
  std::FILE* handle = std::fopen(file.c_str(), "wb");
  if (handle == nullptr) fail(errno);
  const bool written = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), handle) == bytes.size();
  const int error = written ? 0 : errno;
  // fsync per file: the directory's rename at finish() must not publish files still in cache.
  const bool synced = written && std::fflush(handle) == 0 && ::fsync(::fileno(handle)) == 0;
  const int sync_error = synced ? 0 : errno;
  if (std::fclose(handle) != 0 && written && synced) fail(errno);
  if (!written) fail(error);
  if (!synced) fail(sync_error);
}

void PredictionWriter::put_at(std::size_t offset, const std::string& text) {
  if (std::fflush(file_->handle) != 0 || std::fseek(file_->handle, static_cast<long>(offset), SEEK_SET) != 0)
    fail(errno);
  put(text);
  std::fseek(file_->handle, 0, SEEK_END);
}

const std::string& PredictionWriter::row_path(int64_t index) const {
  if (index < 0 || index >= static_cast<int64_t>(row_paths_.size()))
    throw Error("predictions: row " + std::to_string(index) + " has no file (" + std::to_string(row_paths_.size()) +
                " files were given)");
  return row_paths_[static_cast<std::size_t>(index)];
}

bool PredictionWriter::names_classes(const PredictionSchema& schema, std::size_t column) const {
  if (!writes_text_) return false;
  const PredictionColumn& c = schema[column];
  constexpr std::string_view kArgmax = ".argmax";
  if (class_names_.empty() || c.type != PredictionColumn::Type::kInt64 || !c.shape.empty() ||
      !c.name.ends_with(kArgmax))
    return false;
  const std::string output = c.name.substr(0, c.name.size() - kArgmax.size());
  for (const PredictionColumn& scores : schema)
    if (scores.name == output)
      return scores.shape == std::vector<int64_t>{static_cast<int64_t>(class_names_.size())};
  return false;
}

void PredictionWriter::write(const RecordBlock& block) {
  if (!header_written_) {
    schema_ = block.schema;
    write_header(schema_);
    header_written_ = true;
  } else if (block.schema != schema_) {
    throw Error("predictions: a batch has the columns " + columns_text(block.schema) + " where the first had " +
                columns_text(schema_) + "; every sample of a split needs the same output shapes.");
  }
  write_records(block);
  rows_ += block.rows;
}

void PredictionWriter::finish(const PredictionSchema& schema) {
  if (!header_written_) {
    schema_ = schema;
    write_header(schema_);
    header_written_ = true;
  }
  complete(schema_);
  // fsync before the rename: otherwise a power cut can leave the final name on an empty file.
  if (std::fflush(file_->handle) != 0 || ::fsync(::fileno(file_->handle)) != 0) fail(errno);
  const int closed = std::fclose(file_->handle);
  file_->handle = nullptr;
  if (closed != 0) fail(errno);
  if (directory_) {
    sync_directory(partial_);
    replace_directory();
  } else {
    check_output_file(path_, "--output", "predictions"); // what --output names may have changed since
    if (::rename(partial_.c_str(), path_.c_str()) != 0) fail(errno);
  }
  finished_ = true;
  sync_directory(path_.has_parent_path() ? path_.parent_path() : std::filesystem::path("."));
}

void PredictionWriter::replace_directory() {
  // Checked again: files may have been added since the start. rename(2) replaces a missing or
  // empty directory; a previous output of ours moves aside first and only its own files go.
  const std::vector<std::filesystem::path> previous = previous_output_directory(path_, "--output", kClassMapOutput);
  if (previous.empty()) {
    if (::rename(partial_.c_str(), path_.c_str()) != 0) fail(errno);
    return;
  }
  const std::filesystem::path aside = path_.string() + ".replaced-" + std::to_string(::getpid());
  if (::rename(path_.c_str(), aside.c_str()) != 0) fail(errno);
  if (::rename(partial_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::rename(aside.c_str(), path_.c_str()); // the previous output back under its name
    fail(error);
  }
  std::error_code ignored;
  for (const std::filesystem::path& file : previous) std::filesystem::remove(aside / file.filename(), ignored);
  std::filesystem::remove(aside, ignored); // empty now, unless someone wrote into it meanwhile: then it stays
}

void PredictionWriter::fail(int error) const {
  throw Error("writing the predictions to " + path_.string() + " failed (" + partial_.string() + "): " +
              describe_write_error(error) + " Nothing was written under the final name; the partial file is "
              "removed. Choose another --output or free space, then predict again.");
}

}  // namespace tp
