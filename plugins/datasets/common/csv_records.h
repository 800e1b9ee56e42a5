// Reading the records of a CSV file as RFC 4180 and Python's csv module write them, for every
// dataset that takes a CSV: the csv plugin's tables and image_folder's `path,label` listings (the
// listing split each line at its last comma, so pandas' `"e,f.jpg",dog` kept its quotes in the
// path and Excel's byte-order mark became part of the header, data trial F6). One reader, not a
// copy per plugin (tp_csv_records: no OpenCV, no LibTorch; `host shards write` links it through
// image_folder's listing).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace tp::datasets {

/// One record: its cells and the line of the file it starts on (1-based).
struct CsvRecord {
  std::vector<std::string> cells;
  int64_t line = 0;
};

/// The records of a CSV stream, one at a time. The rules, RFC 4180's with Python's leniency:
/// - a UTF-8 byte-order mark at the start of the stream is dropped (Excel's "CSV UTF-8" writes
///   one; kept, it becomes part of the first cell, invisible in a terminal);
/// - records end at LF or CRLF; blank lines are skipped, and so are lines whose first character is
///   `comment` (when not '\0');
/// - a cell that begins with `"` (after spaces) is quoted: it may hold the delimiter, line breaks
///   and `""` for one quote, and its text is kept as written (spaces included); text after its
///   closing quote is appended, as Python's csv does;
/// - an unquoted cell is trimmed of white space, and a `"` inside it is an ordinary character.
/// Not thread-safe; reads the stream sequentially, line by line.
class CsvReader {
 public:
  /// Reads `in`; `name` (the file) and `component` ("csv", "image_folder") go into messages.
  CsvReader(std::istream& in, std::string name, std::string component, char delimiter = ',', char comment = '\0');

  /// The next record into `out`, or false at the end of the stream. Throws
  /// tp::cpp::Failure(TP_ERR_CONFIG) naming the file and the line a quoted cell opens on when the
  /// stream ends before it closes (a `"` missing, which would swallow the rest of the file).
  bool next(CsvRecord& out);

 private:
  bool next_line(std::string& line);

  std::istream& in_;
  std::string name_, component_;
  char delimiter_, comment_;
  int64_t line_ = 0;
};

}  // namespace tp::datasets
