#include "sweep/sweep_record.h"

#include <toml++/toml.h>

#include <sstream>

#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/error.h"
#include "tp/framework/util/atomic_file.h"

namespace tp::cli {
namespace {

// The record is a file in the sweep directory: a --set naming a URI with a password keeps it out.
toml::array to_array(const std::vector<std::string>& values) {
  toml::array out;
  for (const std::string& value : values) out.push_back(redact_uri_credentials(value));
  return out;
}

}  // namespace

SweepRecord SweepRecord::read(const std::filesystem::path& file) {
  SweepRecord record;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return record;
  const auto damaged = [&](const std::string& what) {
    return Error(file.string() + ": " + what + ". This is host sweep's record of which cells finished; restore it, "
                 "or delete it to train every cell again.");
  };
  toml::table root;
  try {
    root = parse_toml_file(file);
  } catch (const toml::parse_error& e) {
    throw damaged("line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  const toml::array* cells = root["cells"].as_array();
  if (cells == nullptr) return record;
  for (const toml::node& node : *cells) {
    const toml::table* table = node.as_table();
    CellRecord cell;
    if (table != nullptr) {
      cell.name = (*table)["name"].value_or(std::string());
      cell.status = (*table)["status"].value_or(std::string());
      cell.exit_code = static_cast<int>((*table)["exit_code"].value_or(int64_t{0}));
      cell.reason = (*table)["reason"].value_or(std::string());
      if (const toml::array* overrides = (*table)["overrides"].as_array())
        for (const toml::node& o : *overrides) cell.overrides.push_back(o.value_or(std::string()));
    }
    if (cell.name.empty() || cell.status.empty()) throw damaged("a [[cells]] entry lacks its name or status");
    record.set(cell);
  }
  return record;
}

const CellRecord* SweepRecord::find(const std::string& name) const {
  for (const CellRecord& cell : cells_)
    if (cell.name == name) return &cell;
  return nullptr;
}

void SweepRecord::set(const CellRecord& cell) {
  for (CellRecord& existing : cells_)
    if (existing.name == cell.name) {
      existing = cell;
      return;
    }
  cells_.push_back(cell);
}

void SweepRecord::write(const std::filesystem::path& file, const std::string& config,
                        const std::vector<std::string>& grid, const std::vector<std::string>& sets) const {
  toml::table root{{"config", config}, {"grid", to_array(grid)}, {"sets", to_array(sets)}};
  toml::array cells;
  for (const CellRecord& cell : cells_) {
    toml::table entry{{"name", cell.name},
                      {"overrides", to_array(cell.overrides)},
                      {"status", cell.status},
                      {"exit_code", cell.exit_code}};
    if (!cell.reason.empty()) entry.insert("reason", redact_uri_credentials(cell.reason));
    cells.push_back(std::move(entry));
  }
  root.insert("cells", std::move(cells));
  std::ostringstream text;
  text << "# host sweep's record of its cells (docs/experiments.md). A cell is finished only when its status\n"
          "# is \"done\", written after its training process exited 0; a rerun of the sweep skips those.\n"
       << root << "\n";
  write_file_atomically(file, text.str());
}

}  // namespace tp::cli
