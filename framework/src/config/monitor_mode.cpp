#include "tp/framework/config/monitor_mode.h"

#include <array>
#include <string>

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
  const auto integer = [&](std::string_view table, std::string_view key) {
    const toml::table* section = root.get_as<toml::table>(table);
    return section == nullptr ? 0 : (*section)[key].value<int64_t>().value_or(0);
  };
  const auto flag = [&](std::string_view table, std::string_view key) {
    const toml::table* section = root.get_as<toml::table>(table);
    return section != nullptr && (*section)[key].value<bool>().value_or(false);
  };
  struct Use {
    std::string_view table;
    bool matters;
  };
  const std::array<Use, 3> uses{{
      {"checkpoint", integer("checkpoint", "save_top_k") > 0 || flag("checkpoint", "load_best_at_end")},
      {"early_stopping", integer("early_stopping", "patience") > 0},
      {"schedule", text_at(root, "schedule", "name") == "reduce_on_plateau"},
  }};
  for (const Use& use : uses) {
    toml::table* section = root.get_as<toml::table>(use.table);
    if (section == nullptr || text_at(root, use.table, "mode") != "auto") continue;
    const std::string monitor = text_at(root, use.table, "monitor");
    const std::optional<bool> lower = lower_is_better_by_name(monitor);
    const std::string key = std::string(use.table) + ".mode";
    if (!lower && use.matters)
      throw ConfigError(key, key + " = \"auto\" cannot tell from the name of " + std::string(use.table) +
                                 ".monitor = \"" + monitor + "\" whether a lower or a higher value is better (names "
                                 "with loss, error, mae or mse mean lower; accuracy, f1, iou, map, auc, precision or "
                                 "recall higher). Set " + key + " = \"min\" or \"max\".");
    section->insert_or_assign("mode", lower.value_or(true) ? "min" : "max");
  }
}

}  // namespace tp
