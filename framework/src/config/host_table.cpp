#include "tp/framework/config/host_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>

#include "tp/framework/config/closest_key.h"
#include "tp/framework/config/host_keys.h"
#include "tp/framework/config/install_layout.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/value.h"
#include "tp/framework/config/value_kinds.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

/// " See <reference.toml> for every key.", naming the file that exists where this host runs (an
/// installed host's own copy, or the source tree's).
std::string see_reference() { return " See " + reference_config() + " for every key."; }

std::string_view head_of(std::string_view path) { return path.substr(0, path.find('.')); }

std::string_view leaf_of(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

void add_unique(std::vector<std::string>& names, std::string_view name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.emplace_back(name);
}

/// The table holding `path`'s last part: "logging.mlflow" for "logging.mlflow.experiment", "" for "train".
std::string_view parent_of(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}

/// The part of `path` right below `table` ("" = the top level): "mlflow" for "logging.mlflow.experiment"
/// below "logging"; "" when `path` is not below `table`.
std::string_view child_below(std::string_view path, std::string_view table) {
  if (!table.empty()) {
    if (path.size() <= table.size() || !path.starts_with(table) || path[table.size()] != '.') return {};
    path.remove_prefix(table.size() + 1);
  }
  return head_of(path);
}

/// Valid keys directly under `table` ("" = the top level): host-key leaves, the tables holding
/// deeper host keys ([logging.mlflow]) and component slots.
std::vector<std::string> children_of(std::string_view table) {
  std::vector<std::string> names;
  auto add = [&](std::string_view path) {
    if (const std::string_view child = child_below(path, table); !child.empty()) add_unique(names, child);
  };
  for (const KeySpec& spec : host_key_schema()) add(spec.path);
  add(kParamGroupsPath);
  for (const ComponentSlot& slot : component_slots()) add(slot.path);
  return names;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

[[noreturn]] void fail(std::string key_path, const std::string& message) {
  throw ConfigError(std::move(key_path), message);
}

[[noreturn]] void unknown_key(std::string_view path, const toml::node& node,
                              std::string_view file) {
  const std::string suggestion = suggest_host_path(path);
  const std::string_view table = parent_of(path);
  std::string message = node_origin(node, file) + ": unknown key '" + std::string(path) + "'";
  if (!suggestion.empty()) message += "; did you mean '" + suggestion + "'?";
  else message += ".";
  const std::vector<std::string> valid = children_of(table);
  if (!valid.empty()) {
    message += table.empty() ? " The top level accepts: "
                             : " [" + std::string(table) + "] accepts: ";
    message += join(valid) + ".";
  }
  fail(std::string(path), message + see_reference());
}

void check_host_key(const KeySpec& spec, const toml::node& node, std::string_view file) {
  if (!matches_type(node, spec.type)) {
    fail(spec.path, node_origin(node, file) + ": " + spec.path + ": expected " +
                        std::string(value_type_phrase(spec.type)) + ", got " + describe_node(node) +
                        ". Set it to " + std::string(value_type_phrase(spec.type)) + ", e.g. " +
                        std::string(leaf_of(spec.path)) + " = " + spec.default_literal +
                        " (the default; " + spec.help + ").");
  }
  // A value kind's message shows a good value; its forms stand for the choices.
  if (spec.kind != nullptr && node.is_string()) {
    const std::string& text = node.as_string()->get();
    if (!spec.kind->accepts(text))
      fail(spec.path, node_origin(node, file) + ": " + value_kind_message(*spec.kind, spec.path, text));
    return;
  }
  if (node.is_string() && !choice_allows(spec, node.as_string()->get())) {
    fail(spec.path, node_origin(node, file) + ": " + spec.path + ": " + describe_node(node) +
                        " is not allowed; expected " + choices_phrase(spec) + " (" + spec.help +
                        ").");
  }
}

void check_component(const ComponentSlot& slot, const std::string& key_path, const toml::node& node,
                     std::string_view file) {
  const std::string example = "component = \"" + std::string(slot.example_id) + "\"";
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    fail(key_path, node_origin(node, file) + ": " + key_path + ": expected a table naming its " +
                       "component, got " + describe_node(node) + ". Write it as a [" + key_path +
                       "] table with " + example + "." + see_reference());
  }
  const toml::node* id = table->get(kComponentKey);
  const std::string id_path = key_path + "." + std::string(kComponentKey);
  if (id == nullptr) {
    fail(id_path, node_origin(node, file) + ": " + key_path + ": missing required key '" +
                      id_path + "' naming the component id. Add " + example + " to [" +
                      key_path + "].");
  }
  if (!id->is_string() || id->as_string()->get().empty()) {
    fail(id_path, node_origin(*id, file) + ": " + id_path + ": expected a non-empty string " +
                      "naming the component id, got " + describe_node(*id) + ". Write e.g. " +
                      example + ".");
  }
}

void check_model_host_keys(const toml::node& node, std::string_view file) {
  const std::pair<std::string_view, const char*> keys[] = {
      {kActivationCheckpointingKey, "Write activation_checkpointing = true to recompute the model's declared blocks "
                                    "in backward (less memory, about one more forward pass of time)."},
      {kFreezeBnStatsKey, "Write freeze_bn_stats = true to keep the model's BatchNorm layers in eval mode while it "
                          "trains (their running statistics stay as loaded)."}};
  for (const auto& [key, hint] : keys) {
    const toml::node* flag = node.as_table() ? node.as_table()->get(key) : nullptr;
    if (flag == nullptr || flag->is_boolean()) continue;
    const std::string path = "model." + std::string(key);
    fail(path, node_origin(*flag, file) + ": " + path + ": expected a boolean, got " + describe_node(*flag) + ". " + hint);
  }
}

/// [[optim.param_groups]]: each a table with a string `pattern` and optional `lr` > 0,
/// `weight_decay` >= 0, `freeze` and `freeze_bn_stats` (bools) and `unfreeze_at_epoch` (integer >= 1,
/// with freeze); nothing else.
void check_param_groups(const toml::node& node, std::string_view file) {
  const std::string path(kParamGroupsPath);
  const std::string example = "[[optim.param_groups]] with pattern = \"head.*\", lr = 1e-3, weight_decay = 0.0";
  const toml::array* groups = node.as_array();
  if (groups == nullptr) {
    fail(path, node_origin(node, file) + ": " + path + ": expected an array of tables (" + example + "), got " +
                   describe_node(node) + ".");
  }
  for (std::size_t i = 0; i < groups->size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    const toml::table* group = groups->get(i)->as_table();
    if (group == nullptr)
      fail(at, node_origin(*groups->get(i), file) + ": " + at + ": expected a table (" + example + ").");
    const toml::node* pattern = group->get("pattern");
    if (pattern == nullptr || !pattern->is_string() || pattern->as_string()->get().empty())
      fail(at + ".pattern", node_origin(*groups->get(i), file) + ": " + at +
                                ": needs a non-empty string `pattern` matched against parameter names "
                                "(a shell glob; `host plugins check` lists the names). Write " + example + ".");
    for (const auto& [key, value] : *group) {
      const std::string name(key.str());
      if (name == "pattern") continue;
      if (name == "freeze" || name == "freeze_bn_stats") {
        if (!value.is_boolean())
          fail(at + "." + name, node_origin(value, file) + ": " + at + "." + name + ": expected true or false, got " +
                                    describe_node(value) + ".");
        continue;
      }
      if (name == "unfreeze_at_epoch") {
        const bool frozen = group->get("freeze") != nullptr && group->get("freeze")->value<bool>().value_or(false);
        if (!value.is_integer() || value.value<int64_t>().value_or(0) < 1 || !frozen)
          fail(at + ".unfreeze_at_epoch", node_origin(value, file) + ": " + at +
                                              ".unfreeze_at_epoch: expected an epoch number >= 1 (1-based) in a group "
                                              "with freeze = true, got " + describe_node(value) + ".");
        continue;
      }
      if (name != "lr" && name != "weight_decay")
        fail(at + "." + name, node_origin(value, file) + ": " + at + ": unknown key '" + name +
                                  "'; a parameter group accepts pattern, lr, weight_decay, freeze, "
                                  "unfreeze_at_epoch and freeze_bn_stats.");
      const std::optional<double> number = value.is_number() ? value.value<double>() : std::nullopt;
      const bool ok = number && std::isfinite(*number) && (name == "lr" ? *number > 0 : *number >= 0);
      if (!ok)
        fail(at + "." + name, node_origin(value, file) + ": " + at + "." + name + ": expected a number " +
                                  (name == "lr" ? "> 0" : ">= 0") + ", got " + describe_node(value) + ".");
    }
  }
}

void check_slot(const ComponentSlot& slot, const toml::node& node, std::string_view file) {
  const std::string path(slot.path);
  if (path == "model") check_model_host_keys(node, file);
  if (!slot.array) return check_component(slot, path, node, file);
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    fail(path, node_origin(node, file) + ": " + path + ": expected an array of tables ([[" + path +
                   "]] blocks, each with component = \"<id>\"), got " + describe_node(node) + ".");
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    check_component(slot, path + "[" + std::to_string(i) + "]", *array->get(i), file);
  }
}

/// Checks the limit of a numeric host key; absent keys get their (valid) default.
void check_limit(const toml::table& root, const HostKey& key, std::string_view file) {
  const KeyLimit& limit = *key.limit;
  const KeySpec& spec = key.spec;
  const toml::node* node = root.at_path(spec.path).node();
  if (node == nullptr) return;
  // Limits compare as doubles, exact for integers up to 2^53; toml++ gives no double for a larger
  // one, which read as 0 said "must be >= 1" of 4611686018427387904 (security trial F15). 2^53 is
  // the bound the keys really have, and the message says so.
  constexpr int64_t kLargestExact = int64_t{1} << 53;
  const bool too_large = node->is_integer() && (node->value<int64_t>().value_or(0) > kLargestExact ||
                                                node->value<int64_t>().value_or(0) < -kLargestExact);
  const double value = node->value<double>().value_or(0.0);
  const bool ok = !too_large && (limit.low_inclusive ? value >= limit.low : value > limit.low) &&
                  (!limit.below || value < *limit.below);
  if (ok && std::isfinite(value)) return;
  std::ostringstream text;
  text << (limit.low_inclusive ? ">= " : "> ") << limit.low;
  if (limit.below) text << " and < " << *limit.below;
  if (too_large && !limit.below) text << " and at most 2^53 = " << kLargestExact << ", the largest integer a host key takes";
  fail(spec.path, node_origin(*node, file) + ": " + spec.path + ": must be " + text.str() +
                      ", got " + describe_node(*node) + " (" + spec.help + ").");
}

/// NaN means nothing for any number the host reads (a decay factor, a norm's order, a momentum):
/// refused for every Float key, also those whose range is open (train.grad_norm_type accepts inf).
void check_not_nan(const toml::table& root, const HostKey& key, std::string_view file) {
  const toml::node* node = root.at_path(key.spec.path).node();
  if (node == nullptr || !node->is_floating_point() || !std::isnan(node->value<double>().value_or(0.0))) return;
  fail(key.spec.path, node_origin(*node, file) + ": " + key.spec.path + ": got nan, which is not a number (" +
                          key.spec.help + "); set a number.");
}

/// Adaptive gradient clipping is timm's third --clip-mode, beside the norm and the value: one
/// clip per run, as there. Norm and value together stay allowed (they always were); AGC with
/// either is refused, since no order of the two would be timm's. (train.agc_ignore without AGC
/// does nothing, as train.init_weights_ignore without init_weights: inert, not contradictory.)
void check_clip_modes(const toml::table& root, std::string_view file) {
  const auto number = [](const toml::node& node) {
    std::ostringstream text;
    text << node.value<double>().value_or(0.0);
    return text.str();
  };
  const toml::node* agc = root.at_path("train.agc_clip_factor").node();
  if (agc == nullptr || agc->value<double>().value_or(0.0) <= 0) return;
  for (const char* other : {"train.max_grad_norm", "train.clip_value"}) {
    const toml::node* node = root.at_path(other).node();
    if (node == nullptr || node->value<double>().value_or(0.0) <= 0) continue;
    fail("train.agc_clip_factor",
         node_origin(*agc, file) + ": train.agc_clip_factor = " + number(*agc) + " (adaptive gradient clipping, "
         "timm's --clip-mode agc) and " + other + " = " + number(*node) + " are two clip modes, and timm's "
         "train.py applies one (--clip-mode norm, value or agc, with --clip-grad its value). Keep one: set " +
         other + " = 0 for AGC alone, or train.agc_clip_factor = 0 for the " +
         (std::string_view(other) == "train.max_grad_norm" ? "global norm clip" : "value clip") + ".");
  }
}

void check_semantics(const toml::table& root, std::string_view file) {
  for (const HostKey& key : host_keys()) {
    if (key.limit) check_limit(root, key, file);
    if (key.spec.type == ValueType::Float) check_not_nan(root, key, file);
  }
  // Refused rather than silently ignored: a user who asks for it expects synchronised statistics.
  if (const toml::node* sync_bn = root.at_path("dist.sync_batchnorm").node();
      sync_bn != nullptr && sync_bn->value<bool>().value_or(false)) {
    fail("dist.sync_batchnorm",
         node_origin(*sync_bn, file) + ": dist.sync_batchnorm = true is not supported: LibTorch's C++ API "
         "has no SyncBatchNorm, and the ATen kernels Python's torch.nn.SyncBatchNorm is built on "
         "(batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt, "
         "batch_norm_backward_reduce/_elemt) exist only for GPUs. Under data-parallel training each rank "
         "normalises with its own batch's statistics, and the running statistics (BatchNorm buffers) are "
         "rank 0's, broadcast before every optimizer step (dist.broadcast_buffers = true). Set "
         "dist.sync_batchnorm = false (or remove it); if per-rank batches are too small for stable "
         "statistics, raise train.batch_size or use a model with GroupNorm or LayerNorm.");
  }
  check_clip_modes(root, file);
  if (const toml::array* betas = root.at_path("optim.betas").as_array()) {
    const bool two = betas->size() == 2;
    const bool in_range = std::all_of(betas->begin(), betas->end(), [](const toml::node& beta) {
      const double value = beta.value<double>().value_or(-1.0);
      return value >= 0.0 && value < 1.0;
    });
    if (!two || !in_range) {
      fail("optim.betas", node_origin(*betas, file) + ": optim.betas: expected two values in " +
                              "[0, 1), e.g. betas = [0.9, 0.999]; got " +
                              std::to_string(betas->size()) + " value(s)" +
                              (two ? " out of range" : "") + ".");
    }
  }
}

}  // namespace

namespace {

// The names PyTorch Lightning, the HF Trainer and timm's scripts give some host keys' settings:
// too far from ours for an edit distance ("learning_rate" is 11 edits from "lr").
std::string_view our_name_for(std::string_view other) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"learning_rate", "lr"},           {"max_epochs", "epochs"},          {"num_train_epochs", "epochs"},
      {"accumulate_grad_batches", "grad_accum_steps"}, {"gradient_accumulation_steps", "grad_accum_steps"},
      {"per_device_train_batch_size", "batch_size"},   {"train_batch_size", "batch_size"},
      {"gradient_clip_val", "max_grad_norm"},           {"min_learning_rate", "min_lr"},
      {"lr_min", "min_lr"},
      {"workers", "num_workers"},         {"seed_everything", "seed"}};
  for (const auto& [theirs, ours] : kNames)
    if (theirs == other) return ours;
  return {};
}

}  // namespace

std::string suggest_host_path(std::string_view path) {
  const bool nested = path.find('.') != std::string_view::npos;
  const std::string_view table = nested ? path.substr(0, path.rfind('.')) : "";
  const std::string leaf(leaf_of(path));
  // 0. Another trainer's name for one of ours: "optim.learning_rate" -> "optim.lr", or where the
  //    name lives ("train.max_epochs" -> "train.epochs").
  if (const std::string_view ours = our_name_for(leaf); !ours.empty()) {
    const std::vector<std::string> here = children_of(table);
    if (std::find(here.begin(), here.end(), ours) != here.end()) return std::string(table) + "." + std::string(ours);
    for (const KeySpec& spec : host_key_schema())
      if (leaf_of(spec.path) == ours) return spec.path;
  }
  // 1. Within the same table: "train.batch_sz" -> "train.batch_size".
  const std::string local = closest_key(leaf, children_of(table));
  if (!local.empty()) return table.empty() ? local : std::string(table) + "." + local;
  // 2. Among all paths: "trian.epochs" -> "train.epochs".
  std::vector<std::string> all;
  for (const KeySpec& spec : host_key_schema()) all.push_back(spec.path);
  for (const ComponentSlot& slot : component_slots()) all.emplace_back(slot.path);
  std::string global = closest_key(path, all);
  if (!global.empty()) return global;
  // 3. The right name in the wrong table: "batch_size" -> "train.batch_size".
  for (const std::string& candidate : all) {
    if (leaf_of(candidate) == leaf) return candidate;
  }
  return "";
}

namespace {

// A section of host keys ([train], and tables within one, [logging.mlflow]) and what it holds.
void check_section(const std::string& name, const toml::node& node, std::string_view source_file) {
  const std::vector<std::string> children = children_of(name);
  if (children.empty()) unknown_key(name, node, source_file);
  const toml::table* section = node.as_table();
  if (section == nullptr) {
    fail(name, node_origin(node, source_file) + ": " + name + ": expected a table ([" + name + "] with keys " +
                   join(children) + "), got " + describe_node(node) + ".");
  }
  for (const auto& [child_key, child] : *section) {
    const std::string path = name + "." + std::string(child_key.str());
    if (const ComponentSlot* slot = find_component_slot(path)) {
      check_slot(*slot, child, source_file);
    } else if (path == kParamGroupsPath) {
      check_param_groups(child, source_file);
    } else if (const KeySpec* spec = find_host_key(path)) {
      check_host_key(*spec, child, source_file);
    } else {
      check_section(path, child, source_file); // a table of deeper keys, or an unknown key
    }
  }
}

}  // namespace

void validate_host_table(const toml::table& root, std::string_view source_file, bool data_only) {
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (const ComponentSlot* slot = find_component_slot(name)) {
      check_slot(*slot, node, source_file);
      continue;
    }
    check_section(name, node, source_file);
  }
  const std::string file = source_file.empty() ? "config" : std::string(source_file);
  for (const ComponentSlot& slot : component_slots()) {
    if (!slot.required || root.at_path(slot.path)) continue;
    if (data_only && !std::string_view(slot.path).starts_with("data.")) continue;
    const std::string path(slot.path);
    fail(path, file + ": missing required table [" + path + "]. Add it with component = \"" +
                   std::string(slot.example_id) + "\" (or another component id) and that " +
                   "component's options." + see_reference());
  }
  check_semantics(root, source_file);
}

void complete_host_table(toml::table& root) {
  for (const KeySpec& spec : host_key_schema()) {
    const std::string leaf(leaf_of(spec.path));
    // The key's table, and those it lies in, created where missing ([logging] for logging.mlflow.*);
    // validate_host_table() has refused a value where a table belongs.
    toml::table* table = ensure_tables(root, parent_of(spec.path));
    if (table == nullptr) throw Error("host key " + spec.path + ": a value stands where its table belongs");
    if (!table->contains(leaf)) {
      std::string error;
      if (!parse_value_into(*table, leaf, spec.default_literal, "default", &error)) {
        throw Error("host key " + spec.path + " has an invalid default: " + error);
      }
    }
    coerce_to_type(*table, leaf, spec.type);
  }
}

}  // namespace tp
