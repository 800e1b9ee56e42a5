// CheckpointManager::find_resume_point: `--resume auto` falls back past damaged checkpoints and
// passes over another run's.
// Kept apart from the save side (checkpoint_manager.cpp) because it is read-only and runs once.
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <utility>

#include "tp/framework/checkpoint/checkpoint_manager.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

struct Candidate {
  std::filesystem::path path;
  int64_t order; ///< higher first: last.pt, then by step, then best.pt
};

// "step-00000120.pt" and "best-step-00000120.pt" -> 120; anything else -> -1.
int64_t step_of(const std::string& name) {
  const std::string digits = name.starts_with("step-")        ? name.substr(5)
                             : name.starts_with("best-step-") ? name.substr(10)
                                                              : std::string();
  if (digits.size() <= 3 || !digits.ends_with(".pt")) return -1;
  const std::string number = digits.substr(0, digits.size() - 3);
  if (number.find_first_not_of("0123456789") != std::string::npos || number.size() > 18) return -1;
  return std::stoll(number);
}

std::vector<Candidate> candidates(const std::filesystem::path& dir) {
  std::vector<Candidate> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // Temporaries (".pending-*", ".last.pt.tmp-*") are never resume points: possibly half written.
    if (name.starts_with(".") || !entry.is_regular_file(ec)) continue;
    // Two sort keys per step: step-N before best-step-N (usually one file anyway).
    if (name == "last.pt") out.push_back({entry.path(), INT64_MAX});
    else if (name == "best.pt") out.push_back({entry.path(), -1});
    else if (const int64_t step = step_of(name); step >= 0)
      out.push_back({entry.path(), 2 * step + (name.starts_with("step-") ? 1 : 0)});
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.order > b.order; });
  return out;
}

}  // namespace

bool is_checkpoint_file_name(const std::string& name) { return name == "last.pt" || name == "best.pt" || step_of(name) >= 0; }

std::optional<CheckpointManager::ResumePoint> CheckpointManager::find_resume_point(
    const std::filesystem::path& dir, const std::function<void(const std::string&)>& warn, const std::string& run_id) {
  const std::vector<Candidate> files = candidates(dir);
  if (files.empty()) return std::nullopt;
  // (device, inode) -> the name it failed under: its other names are the same damaged bytes.
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> bad;
  // (device, inode) -> its run_id, for another run's files: their other names need no load.
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> others;
  std::string tried;
  std::string foreign; // files of another run, with their identities
  int skipped = 0;
  int other_runs = 0;
  for (const Candidate& file : files) {
    struct stat st {};
    const bool have_inode = ::stat(file.path.c_str(), &st) == 0;
    const auto inode = std::make_pair(st.st_dev, st.st_ino);
    const auto same = std::find_if(bad.begin(), bad.end(), [&](const auto& b) { return have_inode && b.first == inode; });
    if (same != bad.end()) {
      warn("--resume auto: skipping " + file.path.string() + ": it is the same file as " + same->second +
           " (a hard link of one save), so it is damaged too");
      ++skipped;
      continue;
    }
    const auto pass_over = [&](const std::string& owner) {
      warn("--resume auto: passing over " + file.path.string() + ": it was saved by run " + owner +
           ", not by this directory's run " + run_id + " (its run.id)");
      foreign += "\n  " + file.path.string() + " (run " + owner + ")";
      ++other_runs;
    };
    const auto other = std::find_if(others.begin(), others.end(), [&](const auto& o) { return have_inode && o.first == inode; });
    if (other != others.end()) {
      pass_over(other->second);
      continue;
    }
    LoadedCheckpoint checkpoint;
    try {
      checkpoint = load_checkpoint(file.path);
    } catch (const CheckpointError& e) {
      warn("--resume auto: cannot resume from " + file.path.string() + ": " + e.what() +
           " Trying the previous checkpoint.");
      if (have_inode) bad.emplace_back(inode, file.path.string());
      tried += "\n  " + file.path.string();
      ++skipped;
      continue;
    }
    if (!run_id.empty() && !checkpoint.run_id.empty() && checkpoint.run_id != run_id) {
      if (have_inode) others.emplace_back(inode, checkpoint.run_id);
      pass_over(checkpoint.run_id);
      continue;
    }
    return ResumePoint{file.path, std::move(checkpoint), skipped, other_runs};
  }
  if (tried.empty())
    throw ConfigError("--resume", "--resume auto: every checkpoint in " + dir.string() + " was saved by another run than "
                                  "the one this directory holds (run " + run_id + ", its run.id):" + foreign +
                                  "\nNothing was trained. To continue one of those runs, name its file: --resume <file>; "
                                  "to start this run afresh, run without --resume, with --new-run.");
  throw CheckpointError("--resume auto: no checkpoint in " + dir.string() + " loads; tried, newest first:" + tried +
                        (foreign.empty() ? "" : "\nPassed over as another run's:" + foreign) +
                        "\nEach one's reason is in the log above. Start a new run without --resume (or with "
                        "train.init_weights = \"<a checkpoint or .safetensors file>\"), or restore a copy of the "
                        "checkpoints directory.");
}

}  // namespace tp
