#include "csv_records.h"

#include <cctype>
#include <utility>

#include "tp/cpp/guard.h"

namespace tp::datasets {
namespace {

bool is_blank(unsigned char c) { return c == ' ' || c == '\t'; }

std::string trimmed(const std::string& text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

}  // namespace

CsvReader::CsvReader(std::istream& in, std::string name, std::string component, char delimiter, char comment)
    : in_(in), name_(std::move(name)), component_(std::move(component)), delimiter_(delimiter), comment_(comment) {}

bool CsvReader::next_line(std::string& line) {
  if (!std::getline(in_, line)) return false;
  ++line_;
  if (line_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool CsvReader::next(CsvRecord& out) {
  std::string line;
  do {
    if (!next_line(line)) return false;
  } while (trimmed(line).empty() || (comment_ != '\0' && line[0] == comment_));
  out.cells.clear();
  out.line = line_;
  std::string cell;
  bool quoted = false;       // inside a quoted cell's quotes
  bool was_quoted = false;   // this cell began with a quote: its text is kept as written
  bool at_start = true;      // nothing but blanks of this cell read yet
  int64_t opened = line_;
  const auto finish_cell = [&] {
    out.cells.push_back(was_quoted ? cell : trimmed(cell));
    cell.clear();
    was_quoted = false;
    at_start = true;
  };
  for (std::size_t i = 0;; ++i) {
    if (i == line.size()) {
      if (!quoted) break;
      // A quoted cell holds a line break: the record goes on on the next line.
      if (!next_line(line))
        throw tp::cpp::Failure(TP_ERR_CONFIG, component_ + ": " + name_ + ":" + std::to_string(opened) +
                                                  ": a quoted cell opens here and is never closed (a '\"' is "
                                                  "missing); quote a cell as \"...\" and write a quote inside it as "
                                                  "\"\"");
      cell += '\n';
      i = static_cast<std::size_t>(-1);
      continue;
    }
    const char c = line[i];
    if (quoted) {
      if (c != '"') {
        cell += c;
      } else if (i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == delimiter_) {
      finish_cell();
    } else if (at_start && c == '"') {
      quoted = was_quoted = true;
      at_start = false;
      opened = line_;
      cell.clear();  // blanks before the quote are not part of the cell
    } else if (was_quoted && is_blank(static_cast<unsigned char>(c))) {
      // blanks between a closing quote and the delimiter
    } else {
      if (!is_blank(static_cast<unsigned char>(c))) at_start = false;
      cell += c;
    }
  }
  finish_cell();
  return true;
}

}  // namespace tp::datasets
