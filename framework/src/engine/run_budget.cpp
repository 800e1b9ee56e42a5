#include "tp/framework/engine/run_budget.h"

#include <cctype>
#include <sstream>
#include <vector>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/error.h"

namespace tp {

double parse_duration(const std::string& text, const std::string& key) {
  if (text.empty()) return 0.0;
  const auto fail = [&] {
    throw ConfigError(key, key + " = \"" + text + "\": expected a duration \"HH:MM:SS\" or \"D:HH:MM:SS\" "
                                                  "(e.g. \"01:30:00\" for an hour and a half), or \"\" for none.");
  };
  std::vector<int64_t> fields;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, ':');) {
    if (field.empty() || field.size() > 6) fail();
    for (char c : field)
      if (!std::isdigit(static_cast<unsigned char>(c))) fail();
    fields.push_back(std::stoll(field));
  }
  if (text.back() == ':' || (fields.size() != 3 && fields.size() != 4)) fail();
  const std::size_t h = fields.size() - 3;
  if (fields[h + 1] >= 60 || fields[h + 2] >= 60 || (h == 1 && fields[h] >= 24)) fail();
  const double days = h == 1 ? static_cast<double>(fields[0]) : 0.0;
  const double seconds = ((days * 24 + fields[h]) * 60 + fields[h + 1]) * 60 + fields[h + 2];
  if (seconds <= 0) fail();
  return seconds;
}

int64_t RunBudget::epochs(int64_t epochs, int64_t steps_per_epoch) const {
  if (max_steps_ <= 0 || steps_per_epoch <= 0) return epochs;
  return (max_steps_ + steps_per_epoch - 1) / steps_per_epoch;
}

void RunBudget::start() {
  started_ = std::chrono::steady_clock::now();
}

double RunBudget::elapsed() const {
  return already_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void RunBudget::save_state(CheckpointContents& into) const { into.train_seconds = elapsed(); }

void RunBudget::load_state(const LoadedCheckpoint& from) { already_ = from.train_seconds; }

}  // namespace tp
