#include "tp/framework/config/monitor_mode.h"

#include <array>
#include <string>

#include "tp/framework/config/run_config.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

constexpr std::array<std::string_view, 13> kLowerWords{"loss", "error", "err",  "mae", "mse",      "rmse", "nll",
                                                       "wer",  "cer",   "fid",  "distance", "perplexity", "latency"};
constexpr std::array<std::string_view, 20> kHigherWords{"accuracy", "acc",   "f1",  "iou",  "miou", "dice", "map",
                                                        "mar",      "ap",    "ar",  "auc",  "auroc", "precision",
                                                        "recall",   "psnr",  "ssim", "r2",  "score", "top", "jaccard"};

/// The words of `text`, lower-cased: runs of letters and digits, each as written and, where it
/// ends in digits, without them too ("f1"; "top5" and "top"; "map_50": "map", "50" and "").
template <typename Visit>
void for_each_word(std::string_view text, Visit visit) {
  std::string word;
  auto flush = [&] {
    visit(std::string_view(word));
    while (!word.empty() && word.back() >= '0' && word.back() <= '9') word.pop_back();
    visit(std::string_view(word));
    word.clear();
  };
  for (const char c : text) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter || (c >= '0' && c <= '9')) word += letter ? static_cast<char>(c | 0x20) : c;
    else flush();
  }
  flush();
}

bool names_one_of(std::string_view text, const auto& words) {
  bool found = false;
  for_each_word(text, [&](std::string_view word) {
    for (std::string_view known : words) found = found || word == known;
  });
  return found;
}

std::string text_at(const toml::table& root, std::string_view table, std::string_view key) {
  const toml::table* section = root.get_as<toml::table>(table);
  return section == nullptr ? std::string() : (*section)[key].value<std::string>().value_or("");
}

}  // namespace

std::optional<bool> lower_is_better_by_name(std::string_view name) {
  // "val/loss/box" is a loss term: lower words count anywhere; higher ones in the last part, so
  // that a split or average prefix ("val_ema") cannot decide.
  if (names_one_of(name, kLowerWords)) return true;
  const std::size_t slash = name.rfind('/');
  if (names_one_of(slash == std::string_view::npos ? name : name.substr(slash + 1), kHigherWords)) return false;
  return std::nullopt;
}

void resolve_monitor_modes(toml::table& root) {
  for (const std::string_view table : {"checkpoint", "early_stopping", "schedule"}) {
    toml::table* section = root.get_as<toml::table>(table);
    if (section == nullptr || text_at(root, table, "mode") != "auto") continue;
    if (const std::optional<bool> lower = lower_is_better_by_name(text_at(root, table, "monitor")))
      section->insert_or_assign("mode", *lower ? "min" : "max");
  }
}

std::vector<MonitorInUse> monitors_in_use(const RunConfig& config) {
  std::vector<MonitorInUse> in_use;
  if (config.checkpoint.save_top_k > 0 || config.checkpoint.load_best_at_end)
    in_use.push_back({"checkpoint", config.checkpoint.monitor, config.checkpoint.mode,
                      ", or checkpoint.save_top_k = 0 and checkpoint.load_best_at_end = false"});
  if (config.early_stopping.patience > 0)
    in_use.push_back({"early_stopping", config.early_stopping.monitor, config.early_stopping.mode,
                      ", or early_stopping.patience = 0"});
  if (config.schedule.name == "reduce_on_plateau")
    in_use.push_back({"schedule", config.schedule.monitor, config.schedule.mode, ""});
  return in_use;
}

void require_monitor_directions(const RunConfig& config) {
  for (const MonitorInUse& use : monitors_in_use(config)) {
    if (use.mode != "auto") continue;
    const std::string key = std::string(use.table) + ".mode";
    throw ConfigError(key, key + " = \"auto\" cannot tell from the name of " + use.table + ".monitor = \"" +
                               use.monitor + "\" whether a lower or a higher value is better (names with loss, error, "
                               "mae or mse mean lower; accuracy, f1, iou, map, auc, precision or recall higher). Set " +
                               key + " = \"min\" or \"max\".");
  }
}

}  // namespace tp
