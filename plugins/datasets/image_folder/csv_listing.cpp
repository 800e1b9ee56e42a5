#include "csv_listing.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "csv_records.h"
#include "image_file.h"
#include "listing_text.h"
#include "tp/cpp/guard.h"
#include "regular_input.h"

namespace tp::image_folder {
namespace {

namespace fs = std::filesystem;
using tp::cpp::Failure;

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  std::size_t used = 0;
  try {
    *out = std::stoll(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size();
}

template <std::size_t N>
bool one_of(const std::string& cell, const char* const (&names)[N]) {
  const std::string lowered = datasets::lower_case(cell);
  return std::any_of(std::begin(names), std::end(names), [&](const char* name) { return lowered == name; });
}

template <std::size_t N>
std::string spelled(const char* const (&names)[N]) {
  std::string text;
  for (const char* name : names) text += (text.empty() ? "" : "/") + std::string(name);
  return text;
}

/// One listed row: the resolved path, its label cell and its line; `names`, a multi-label row's
/// labels (sorted, unique), and `label` then their text joined by ';' (what check_duplicates compares).
struct Row {
  std::string path, label;
  int64_t line = 0;
  std::vector<std::string> names;
};

std::string where(const std::string& csv_path, int64_t line) {
  return "image_folder: " + csv_path + ":" + std::to_string(line) + ": ";
}

/// A row listing a path a row before it listed: refused with another label (which would the file
/// be?), counted with the same one (each listing is a sample; warned of once).
void check_duplicates(const std::string& csv_path, const std::vector<Row>& rows, Listing& out) {
  std::map<std::string, std::size_t> first;  // normalised path -> its first row
  std::size_t repeats = 0;
  std::string example;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto [at, fresh] = first.emplace(fs::path(rows[i].path).lexically_normal().string(), i);
    if (fresh) continue;
    const Row& before = rows[at->second];
    if (before.label != rows[i].label)
      throw Failure(TP_ERR_CONFIG, where(csv_path, rows[i].line) + "'" + rows[i].path + "' is listed with label '" +
                                       rows[i].label + "', and on line " + std::to_string(before.line) +
                                       " with label '" + before.label +
                                       "': a file has one label (or one set of labels); remove the row that is wrong");
    if (repeats++ == 0)
      example = "'" + rows[i].path + "' on lines " + std::to_string(before.line) + " and " + std::to_string(rows[i].line);
  }
  if (repeats > 0)
    out.warnings.push_back("'" + csv_path + "' lists " + std::to_string(repeats) +
                           (repeats == 1 ? " path again" : " paths again") + " with the same label (" + example +
                           "): each row is a sample, so such a file is seen more often per epoch; remove the "
                           "repeated rows unless that is meant");
}

/// Class names that differ only by case ('Cat' and 'cat') are two classes: warned of, naming both.
void check_case(const std::string& csv_path, const std::vector<std::string>& classes, Listing& out) {
  std::map<std::string, std::vector<std::string>> by_lower;
  for (const std::string& name : classes) by_lower[datasets::lower_case(name)].push_back(name);
  for (const auto& [lower, names] : by_lower) {
    if (names.size() < 2) continue;
    std::string listed;
    for (std::size_t i = 0; i < names.size(); ++i)
      listed += (i == 0 ? "'" : i + 1 == names.size() ? "' and '" : "', '") + names[i];
    out.warnings.push_back("'" + csv_path + "' names the classes " + listed +
                           "', which differ only by case: they are " + std::to_string(names.size()) +
                           " classes with their own ids; make the labels the same if they mean one class");
  }
}

/// A multi-label cell's labels: split at `separator`, spaces around each trimmed, empty pieces
/// (doubled or trailing separators, several spaces) and repeats dropped, sorted.
std::vector<std::string> split_labels(const std::string& cell, const std::string& separator) {
  std::vector<std::string> names;
  for (std::size_t begin = 0; begin <= cell.size();) {
    const std::size_t end = std::min(cell.find(separator, begin), cell.size());
    std::string piece = cell.substr(begin, end - begin);
    const std::size_t first = piece.find_first_not_of(" \t"), last = piece.find_last_not_of(" \t");
    if (first != std::string::npos) names.push_back(piece.substr(first, last - first + 1));
    begin = end + separator.size();
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

/// Each multi-label row's labels as class ids in `out` (label_sets; classes: the sorted union,
/// or "0".."max" when every label is an integer).
void assign_label_sets(const std::string& csv_path, std::vector<Row>& rows, Listing& out) {
  bool integers = true, any = false;
  int64_t value = 0, max_label = -1;
  for (const Row& row : rows)
    for (const std::string& name : row.names) {
      any = true;
      integers = integers && parse_int(name, &value) && value >= 0;
      if (integers) max_label = std::max(max_label, value);
    }
  if (!any) throw Failure(TP_ERR_CONFIG, "image_folder: csv '" + csv_path + "' lists no label at all (multi_label)");
  std::map<std::string, int64_t> ids;
  if (integers) {
    for (int64_t c = 0; c <= max_label; ++c) out.classes.push_back(std::to_string(c));
  } else {
    for (const Row& row : rows)
      for (const std::string& name : row.names) {
        if (const std::string problem = datasets::class_name_text_problem(name); !problem.empty())
          throw Failure(TP_ERR_CONFIG, where(csv_path, row.line) + "the label '" + datasets::shown_bytes(name) + "' " +
                                           problem + ", and a class name must be UTF-8 text without control "
                                           "characters; save the file as UTF-8 (or fix the label)");
        if (parse_int(name, &value))
          throw Failure(TP_ERR_CONFIG, where(csv_path, row.line) + "label '" + name + "' is an integer among names: "
                                           "the labels must be all class ids or all names");
        ids.emplace(name, 0);
      }
    for (auto& [name, id] : ids) {
      id = static_cast<int64_t>(out.classes.size());
      out.classes.push_back(name);
    }
  }
  for (const Row& row : rows) {
    std::vector<int64_t> set;
    for (const std::string& name : row.names) {
      if (!integers) {
        set.push_back(ids.at(name));
      } else if (parse_int(name, &value)) {
        set.push_back(value);
      } else {
        throw Failure(TP_ERR_CONFIG, where(csv_path, row.line) + "label '" + name + "' is not a non-negative integer "
                                         "(the others are, so all must be)");
      }
    }
    std::sort(set.begin(), set.end());
    out.label_sets.push_back(std::move(set));
  }
  if (!integers) check_case(csv_path, out.classes, out);
}

/// What to add when missing paths hold '\\': how many, whether the first ones exist with '/', and
/// how to rewrite the listing.
std::string backslash_note(std::size_t backslashed, std::size_t missing, std::size_t found, std::size_t tried) {
  if (backslashed == 0) return "";
  return " " + std::string(backslashed == missing ? "Every one" : std::to_string(backslashed) + " of them") +
         " holds '\\', the Windows path separator (pandas' to_csv on Windows writes paths so): on this system '\\' "
         "is part of a file name, not a separator" +
         (found > 0 ? " (with '/' in its place, " + std::to_string(found) + " of the first " + std::to_string(tried) +
                          " exist)"
                    : "") +
         ". Rewrite the paths with '/' (in pandas: df.path.str.replace('\\\\', '/'), or pathlib.PureWindowsPath(p).as_posix(); "
         "or sed 's#\\\\#/#g' on the file).";
}

/// Every listed file exists: one stat per row, at create, instead of a sample failing an epoch in.
void check_files_exist(const std::string& csv_path, const std::string& base_dir, const std::vector<Row>& rows,
                       bool header) {
  constexpr std::size_t kShown = 5;
  std::size_t missing = 0, backslashed = 0, found_with_slashes = 0;
  std::string shown;
  bool first_line_missing = false;
  for (const Row& row : rows) {
    struct stat info {};
    if (::stat(row.path.c_str(), &info) == 0) continue;
    const int error = errno;
    first_line_missing = first_line_missing || &row == &rows.front();
    // A Windows path (pandas on Windows writes `dog\x.jpg`): '\' is a name's byte here, not a
    // separator. Counted, and the first few looked up with '/' (data trial F7).
    if (row.path.find('\\') != std::string::npos) {
      std::string slashed = row.path;
      std::replace(slashed.begin(), slashed.end(), '\\', '/');
      if (++backslashed <= kShown && ::stat(slashed.c_str(), &info) == 0) ++found_with_slashes;
    }
    if (++missing <= kShown)
      shown += "\n  line " + std::to_string(row.line) + ": '" + row.path + "' (" + std::strerror(error) + ")";
  }
  if (missing == 0) return;
  const std::string header_note =
      first_line_missing && !header
          ? " If the first row is a header, name its columns path,label (accepted: " + spelled(kCsvPathNames) +
                " and " + spelled(kCsvLabelNames) + ")."
          : "";
  throw Failure(TP_ERR_IO, "image_folder: " + std::to_string(missing) + " of " + std::to_string(rows.size()) +
                               " files listed in '" + csv_path + "' do not exist (relative paths start from '" +
                               base_dir + "')" + (missing > kShown ? ", the first " + std::to_string(kShown) : "") +
                               ":" + shown + "\nFix their paths or remove their rows." + header_note +
                               backslash_note(backslashed, missing, found_with_slashes, std::min(backslashed, kShown)));
}

}  // namespace

Listing read_csv_listing(const std::string& csv_path, const std::string& base_dir, bool allow_outside_root,
                         const std::string& label_separator) {
  const bool multi = !label_separator.empty();
  datasets::refuse_special_input(csv_path, "image_folder", "a csv listing");
  std::ifstream in(csv_path, std::ios::binary);
  if (!in) throw Failure(TP_ERR_IO, "image_folder: cannot open csv '" + csv_path + "'; check `csv`");
  datasets::CsvReader reader(in, csv_path, "image_folder", ',', '#');
  std::vector<Row> rows;
  std::size_t path_column = 0;  // 1 when a header names the columns label,path
  bool first = true, header = false;
  for (datasets::CsvRecord record; reader.next(record);) {
    std::vector<std::string>& cells = record.cells;
    if (cells.size() != 2) {
      std::string shown;
      for (const std::string& cell : cells) shown += (shown.empty() ? "'" : ", '") + cell + "'";
      throw Failure(TP_ERR_CONFIG, where(csv_path, record.line) + std::to_string(cells.size()) +
                                       (cells.size() == 1 ? " field" : " fields") + " (" + shown +
                                       "), expected 2: path,label. Quote a path that holds a comma (\"e,f.jpg\", as "
                                       "pandas and Python's csv write it), and write only those two columns (pandas: "
                                       "df[[\"path\", \"label\"]].to_csv(f, index=False))");
    }
    if (std::exchange(first, false)) {
      header = (one_of(cells[0], kCsvPathNames) && one_of(cells[1], kCsvLabelNames)) ||
               (one_of(cells[0], kCsvLabelNames) && one_of(cells[1], kCsvPathNames));
      if (header) {
        path_column = one_of(cells[0], kCsvPathNames) ? 0 : 1;
        continue;
      }
    }
    std::string path = std::move(cells[path_column]);
    std::string label = std::move(cells[1 - path_column]);
    if (path.empty() || (label.empty() && !multi))
      throw Failure(TP_ERR_CONFIG, where(csv_path, record.line) + "empty " + (path.empty() ? "path" : "label") +
                                       " in a row of '" + path + "', '" + label + "'");
    // A row names a file under `root`: an absolute path or one climbing out with '..' reads any
    // file the user can (issue 58), unless the table says the listing reaches files elsewhere.
    if (const std::string why = datasets::escapes_root(path); !why.empty() && !allow_outside_root)
      throw Failure(TP_ERR_CONFIG, where(csv_path, record.line) + "the path '" + path +
                                       "' names a file outside `root` (" + base_dir + "): it " + why +
                                       "; list paths inside it, or set allow_outside_root = true if the listing is "
                                       "meant to reach files elsewhere");
    const fs::path p(path);
    Row row{p.is_absolute() ? path : (fs::path(base_dir) / p).string(), std::move(label), record.line, {}};
    if (multi) {
      row.names = split_labels(row.label, label_separator);
      row.label.clear();
      for (const std::string& name : row.names) row.label += (row.label.empty() ? "" : ";") + name;
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw Failure(TP_ERR_CONFIG, "image_folder: csv '" + csv_path + "' lists no image");

  Listing out;
  int64_t value = 0;
  if (multi) {
    assign_label_sets(csv_path, rows, out);
  } else if (parse_int(rows.front().label, &value)) {
    int64_t max_label = 0;
    for (const Row& row : rows) {
      if (!parse_int(row.label, &value) || value < 0)
        throw Failure(TP_ERR_CONFIG, where(csv_path, row.line) + "label '" + row.label +
                                         "' is not a non-negative integer (the first row's label is, so all must be)");
      out.labels.push_back(value);
      max_label = std::max(max_label, value);
    }
    for (int64_t c = 0; c <= max_label; ++c) out.classes.push_back(std::to_string(c));
  } else {
    std::map<std::string, int64_t> ids;
    for (const Row& row : rows) {
      // As for a class folder's name (image_listing.cpp): the host refuses such a name later,
      // without naming the row.
      if (const std::string problem = datasets::class_name_text_problem(row.label); !problem.empty())
        throw Failure(TP_ERR_CONFIG, where(csv_path, row.line) + "the label '" + datasets::shown_bytes(row.label) +
                                         "' " + problem + ", and a class name must be UTF-8 text without control "
                                         "characters; save the file as UTF-8 (or fix the label)");
      ids.emplace(row.label, 0);
    }
    for (auto& [name, id] : ids) {
      id = static_cast<int64_t>(out.classes.size());
      out.classes.push_back(name);
    }
    for (const Row& row : rows) out.labels.push_back(ids.at(row.label));
    check_case(csv_path, out.classes, out);
  }
  check_duplicates(csv_path, rows, out);
  check_files_exist(csv_path, base_dir, rows, header);
  for (Row& row : rows) out.paths.push_back(std::move(row.path));
  return out;
}

}  // namespace tp::image_folder
