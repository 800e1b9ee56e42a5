#include "tp/framework/checkpoint/checkpoint_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tp/framework/monitor/history.h"
#include "tp/framework/error.h"
#include "tp/framework/util/own_directory.h"
#include "tp/framework/util/atomic_file.h"
#include "tp/framework/util/stale_temporaries.h"

namespace tp {
namespace {

constexpr char kLast[] = "last.pt";
constexpr char kBest[] = "best.pt";
constexpr char kRanking[] = "best.tsv";

}  // namespace

void CheckpointManager::sweep_stale_temporaries() const {
  // A writer killed mid-save leaves its temporary behind, as big as a checkpoint
  // (util/stale_temporaries.h says whose are removed).
  tp::sweep_stale_temporaries(dir_, /*levels=*/0);
}

std::string numbered_checkpoint_name(const std::string& prefix, int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%08lld", static_cast<long long>(step));
  return prefix + digits + ".pt";
}

CheckpointManager::CheckpointManager(std::filesystem::path dir, CheckpointSection options, bool writer)
    : dir_(std::move(dir)), options_(std::move(options)), writer_(writer) {}

bool CheckpointManager::better(double a, double b) const { return options_.mode == "max" ? a > b : a < b; }

bool CheckpointManager::qualifies(double value) const {
  if (options_.save_top_k <= 0 || !std::isfinite(value)) return false;
  if (static_cast<int64_t>(ranking_.size()) < options_.save_top_k) return true;
  return better(value, ranking_.back().value);
}

std::optional<double> CheckpointManager::best() const {
  if (ranking_.empty()) return std::nullopt;
  return ranking_.front().value;
}

std::optional<double> CheckpointManager::best_including(double value) const {
  if (qualifies(value) && (ranking_.empty() || better(value, ranking_.front().value))) return value;
  return best();
}

void CheckpointManager::restore() {
  ranking_.clear();
  std::ifstream in(dir_ / kRanking);
  std::string header;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) header = line;
    std::istringstream fields(line);
    Ranked entry{};
    if (!(fields >> entry.value >> entry.step >> entry.file)) continue; // header or damaged line
    if (std::filesystem::exists(dir_ / entry.file)) ranking_.push_back(entry);
  }
  std::stable_sort(ranking_.begin(), ranking_.end(),
                   [&](const Ranked& a, const Ranked& b) { return better(a.value, b.value); });
  // One entry per step: a best.tsv written before the same-step fix may rank one evaluation twice.
  for (auto at = ranking_.begin(); at != ranking_.end(); ++at)
    ranking_.erase(std::remove_if(std::next(at), ranking_.end(), [&](const Ranked& r) { return r.step == at->step; }),
                   ranking_.end());
  if (static_cast<int64_t>(ranking_.size()) > options_.save_top_k) ranking_.resize(static_cast<std::size_t>(options_.save_top_k));
  // A ranking kept in the other direction (checkpoint.mode changed, or "auto" resolved it otherwise
  // than an older run's default "min"): best.pt and best.tsv follow the new order now, or
  // load_best_at_end would load the old best, which is now the worst.
  const bool same_monitor = header.find("monitor " + options_.monitor + ", mode ") != std::string::npos;
  const bool other_mode = header.find(", mode " + options_.mode + ")") == std::string::npos;
  if (writer_ && !ranking_.empty() && same_monitor && other_mode) {
    link_file_atomically(dir_ / ranking_.front().file, dir_ / kBest);
    write_ranking();
  }
}

std::vector<std::filesystem::path> CheckpointManager::save(const CheckpointContents& contents, int64_t step,
                                                           bool periodic, std::optional<double> monitor_value) {
  // 1. Decide the names. The ranking is updated on every rank so decisions stay identical.
  std::vector<std::string> names;
  if (periodic && options_.save_last) names.emplace_back(kLast);
  if (periodic && options_.keep_last > 0) names.push_back(numbered_checkpoint_name("step-", step));
  std::optional<Ranked> evicted;
  bool new_best = false, ranked = false;
  // A second save at a step already ranked (the save at an epoch's last step, then the run's final
  // save at that step) replaces that step's entry: ranked twice, the one evaluation pushed the
  // runner-up out of the top k and deleted its file.
  const auto same_step = std::find_if(ranking_.begin(), ranking_.end(), [&](const Ranked& r) { return r.step == step; });
  if (monitor_value && same_step != ranking_.end()) ranking_.erase(same_step);
  if (monitor_value && qualifies(*monitor_value)) {
    ranked = true;
    const Ranked entry{*monitor_value, step, numbered_checkpoint_name("best-step-", step)};
    const auto at = std::find_if(ranking_.begin(), ranking_.end(),
                                 [&](const Ranked& r) { return better(entry.value, r.value); });
    new_best = at == ranking_.begin();
    ranking_.insert(at, entry);
    if (static_cast<int64_t>(ranking_.size()) > options_.save_top_k) {
      evicted = ranking_.back();
      ranking_.pop_back();
    }
    names.push_back(entry.file);
    if (new_best) names.emplace_back(kBest);
  }
  if (!writer_ || names.empty()) return {};

  // 2. Serialise once (atomic: temp + fsync + rename), then link every name to it.
  // Made here, never reached through a link planted in its place (security trial F6): that is
  // refused (ConfigError, exit 2) naming the link.
  try {
    make_own_directory(dir_);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw Error("saving the checkpoint of step " + std::to_string(step) + ": " + e.what() + " Every earlier "
                "checkpoint is intact. Free the path or choose another run.output_dir.");
  }
  if (!swept_) sweep_stale_temporaries();
  swept_ = true;
  const std::filesystem::path pending = dir_ / (".pending-" + std::to_string(::getpid()) + ".pt");
  std::vector<std::filesystem::path> written;
  try {
    save_checkpoint(pending, contents);
    for (const std::string& name : names) {
      link_file_atomically(pending, dir_ / name);
      written.push_back(dir_ / name);
    }
  } catch (const Error& e) {
    // The user knows last.pt, not .pending-<pid>.pt: name the checkpoint and what is still intact.
    std::error_code ignored;
    std::filesystem::remove(pending, ignored);
    std::string files;
    for (const std::string& name : names) files += (files.empty() ? "" : ", ") + name;
    throw Error("saving the checkpoint of step " + std::to_string(step) + " (" + files + ") in " + dir_.string() +
                " failed; every earlier checkpoint there is intact and loadable (--resume auto). " + e.what());
  }
  std::filesystem::remove(pending);

  // 3. Evict only after the new files exist: a crash in between leaves one file too many.
  if (evicted) {
    std::error_code ignored;
    std::filesystem::remove(dir_ / evicted->file, ignored);
  }
  if (ranked) write_ranking();
  if (periodic) evict_numbered();
  return written;
}

void CheckpointManager::evict_numbered() {
  std::vector<std::string> numbered;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step-") && name.ends_with(".pt")) numbered.push_back(name);
  }
  std::sort(numbered.begin(), numbered.end()); // zero-padded: lexical order is step order
  const auto keep = static_cast<std::size_t>(std::max<int64_t>(0, options_.keep_last));
  for (std::size_t i = 0; i + keep < numbered.size(); ++i) std::filesystem::remove(dir_ / numbered[i], ec);
}

void CheckpointManager::write_ranking() const {
  std::string text = "# value\tstep\tfile (best first; monitor " + options_.monitor + ", mode " + options_.mode + ")\n";
  for (const Ranked& r : ranking_) text += format_number(r.value) + "\t" + std::to_string(r.step) + "\t" + r.file + "\n";
  write_file_atomically(dir_ / kRanking, text);
}

std::optional<std::filesystem::path> CheckpointManager::latest(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / kLast)) return dir / kLast;
  std::optional<std::filesystem::path> newest;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step-") && name.ends_with(".pt") && (!newest || name > newest->filename().string()))
      newest = entry.path();
  }
  return newest;
}

}  // namespace tp
