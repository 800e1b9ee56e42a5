// The host key table: every key fills a member of its own, every member of a key section has a
// key, a value set on a key reaches that key's section and no other, the table's limits are what
// validation enforces, and [schedule] loads straight into the scheduler's options.
#include <cmath>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/config/host_keys.h"
#include "tp/framework/config/value.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::kRequiredComponents;
using tp::test::load_text;

/// Converts to any member type, so T{AnyField{}, ...} compiles exactly up to T's field count.
struct AnyField {
  template <typename T>
  operator T() const; // declared only: used in unevaluated requires-expressions
};

/// The number of fields of aggregate T (C++20 has no reflection; aggregate initialization with
/// one more initializer than T has fields does not compile).
template <typename T, typename... Fields>
constexpr std::size_t field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return field_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

struct ThreeFields {
  int64_t a;
  std::vector<double> b;
  std::optional<double> c;
};
static_assert(field_count<ThreeFields>() == 3, "field_count counts the fields of an aggregate");

std::string section_of(const std::string& path) { return path.substr(0, path.find('.')); }

/// The members that bound keys fill inside `cfg.*section` (a key of a value kind may fill a
/// parsed member too); CHECKs that a key's members lie in the section its path names.
template <typename Section>
std::size_t keys_inside(const char* name, Section tp::RunConfig::*section) {
  tp::RunConfig cfg{};
  const auto begin = reinterpret_cast<std::uintptr_t>(&(cfg.*section));
  std::size_t inside_count = 0;
  for (const tp::HostKey& key : tp::host_keys()) {
    for (void* (*member)(tp::RunConfig&) : {key.member, key.parsed_member}) {
      if (member == nullptr) continue;
      const auto at = reinterpret_cast<std::uintptr_t>(member(cfg));
      const bool inside = at >= begin && at < begin + sizeof(Section);
      CHECK_MESSAGE(inside == (section_of(key.spec.path) == name),
                    key.spec.path << " fills a member " << (inside ? "inside" : "outside") << " [" << name << "]");
      inside_count += inside ? 1 : 0;
    }
  }
  return inside_count;
}

TEST_CASE("every host key fills a member of its own, and every member of a section has a key") {
  tp::RunConfig cfg{};
  std::set<void*> members;
  for (const tp::HostKey& key : tp::host_keys()) {
    CAPTURE(key.spec.path);
    CHECK((key.read == nullptr) == (key.member == nullptr));
    CHECK((key.read_parsed == nullptr) == (key.parsed_member == nullptr));
    if (key.member == nullptr) {
      CHECK(key.spec.path == "dist.sync_batchnorm"); // refused when true; nothing reads it
      continue;
    }
    CHECK_MESSAGE(members.insert(key.member(cfg)).second, "two keys fill the same member");
    if (key.parsed_member != nullptr) {
      CHECK(key.spec.kind != nullptr); // a parsed member is a value kind's
      CHECK_MESSAGE(members.insert(key.parsed_member(cfg)).second, "two keys fill the same member");
    }
  }
  // Members that no host key fills: [[optim.param_groups]] and the component tables of [data]
  // (train, val, test, [[data.batch_transforms]]).
  CHECK(keys_inside("run", &tp::RunConfig::run) == field_count<tp::RunSection>());
  CHECK(keys_inside("train", &tp::RunConfig::train) == field_count<tp::TrainSection>());
  CHECK(keys_inside("eval", &tp::RunConfig::eval) == field_count<tp::EvalSection>());
  CHECK(keys_inside("optim", &tp::RunConfig::optim) + 1 == field_count<tp::OptimSection>());
  CHECK(keys_inside("data", &tp::RunConfig::data) + 4 == field_count<tp::DataSection>()); // train, val, test, batch_transforms
  CHECK(keys_inside("checkpoint", &tp::RunConfig::checkpoint) == field_count<tp::CheckpointSection>());
  CHECK(keys_inside("progress", &tp::RunConfig::progress) == field_count<tp::ProgressSection>());
  CHECK(keys_inside("amp", &tp::RunConfig::amp) == field_count<tp::AmpSection>());
  CHECK(keys_inside("schedule", &tp::RunConfig::schedule) == field_count<tp::SchedulerOptions>());
  CHECK(keys_inside("early_stopping", &tp::RunConfig::early_stopping) ==
        field_count<tp::EarlyStoppingSection>());
  CHECK(keys_inside("plots", &tp::RunConfig::plots) == field_count<tp::PlotsSection>());
  // [logging.mlflow], a table inside [logging]: its keys fill MlflowSection's members.
  CHECK(keys_inside("logging", &tp::RunConfig::logging) ==
        field_count<tp::LoggingSection>() - 1 + field_count<tp::MlflowSection>());
  CHECK(keys_inside("dist", &tp::RunConfig::dist) == field_count<tp::DistSection>());
  CHECK(keys_inside("ema", &tp::RunConfig::ema) == field_count<tp::EmaSection>());
  CHECK(keys_inside("swa", &tp::RunConfig::swa) == field_count<tp::SwaSection>());
  CHECK(keys_inside("plugins", &tp::RunConfig::plugin_dirs) == 1);
}

/// A valid value of `key` other than its default, as a --set literal.
std::string other_value(const tp::HostKey& key) {
  toml::table scratch;
  REQUIRE(tp::parse_value_into(scratch, "v", key.spec.default_literal, "test"));
  const toml::node& value = *scratch.get("v");
  switch (key.spec.type) {
    case tp::ValueType::Bool: return value.value<bool>().value_or(false) ? "false" : "true";
    case tp::ValueType::Int: return std::to_string(value.value<int64_t>().value_or(0) + 1);
    case tp::ValueType::Float: {
      const double fallback = value.value<double>().value_or(0.0);
      // An infinite default ("never", early_stopping.stop_above): any finite value differs.
      if (!std::isfinite(fallback)) return "0.0";
      // Bounded above: halfway from the default to the bound (inside the range, whether the
      // default sits at the lower bound or not).
      const bool bounded = key.limit && key.limit->below;
      return std::to_string(bounded ? (fallback + *key.limit->below) / 2 : fallback + 1);
    }
    case tp::ValueType::String:
      if (key.spec.kind != nullptr) return std::string(key.spec.kind->example);
      // mode = "auto" resolves to "min" for the default monitor (val/loss): only "max" changes it.
      if (std::find(key.spec.choices.begin(), key.spec.choices.end(), "max") != key.spec.choices.end() &&
          value.value<std::string>() == "auto")
        return "\"max\"";
      for (const std::string& choice : key.spec.choices) {
        if (choice != value.value<std::string>() && !choice.ends_with(":N")) return "\"" + choice + "\"";
      }
      // A monitor stays a name whose direction mode = "auto" can tell ("val/loss/x": a loss term).
      if (key.spec.path.ends_with(".monitor")) return "\"" + value.value<std::string>().value_or("") + "/x\"";
      return "\"" + value.value<std::string>().value_or("") + "x\"";
    case tp::ValueType::IntArray: return "[1]";
    case tp::ValueType::FloatArray: return "[0.5, 0.5]";
    case tp::ValueType::StringArray: return "[\"x\"]";
  }
  return "";
}

using SameSection = std::function<bool(const tp::RunConfig&, const tp::RunConfig&)>;

TEST_CASE("a value set on a host key reaches its own section and no other") {
  const std::vector<std::pair<std::string, SameSection>> sections = {
      {"run", [](const auto& a, const auto& b) { return a.run == b.run; }},
      {"train", [](const auto& a, const auto& b) { return a.train == b.train; }},
      {"eval", [](const auto& a, const auto& b) { return a.eval == b.eval; }},
      {"optim", [](const auto& a, const auto& b) { return a.optim == b.optim; }},
      {"data", [](const auto& a, const auto& b) { return a.data == b.data; }},
      {"checkpoint", [](const auto& a, const auto& b) { return a.checkpoint == b.checkpoint; }},
      {"progress", [](const auto& a, const auto& b) { return a.progress == b.progress; }},
      {"amp", [](const auto& a, const auto& b) { return a.amp == b.amp; }},
      {"schedule", [](const auto& a, const auto& b) { return a.schedule == b.schedule; }},
      {"early_stopping", [](const auto& a, const auto& b) { return a.early_stopping == b.early_stopping; }},
      {"plots", [](const auto& a, const auto& b) { return a.plots == b.plots; }},
      {"logging", [](const auto& a, const auto& b) { return a.logging == b.logging; }},
      {"plugins", [](const auto& a, const auto& b) { return a.plugin_dirs == b.plugin_dirs; }},
      {"dist", [](const auto& a, const auto& b) { return a.dist == b.dist; }},
      {"ema", [](const auto& a, const auto& b) { return a.ema == b.ema; }},
      {"swa", [](const auto& a, const auto& b) { return a.swa == b.swa; }},
  };
  const tp::RunConfig defaults = load_text(kRequiredComponents);
  for (const tp::HostKey& key : tp::host_keys()) {
    if (key.read == nullptr) continue;
    const std::string set = key.spec.path + "=" + other_value(key);
    CAPTURE(set);
    const tp::RunConfig changed = load_text(kRequiredComponents, {set});
    for (const auto& [name, same] : sections) {
      CHECK_MESSAGE(same(changed, defaults) == (name != section_of(key.spec.path)), "section [" << name << "]");
    }
  }
}

TEST_CASE("validation enforces the limit each row declares") {
  std::size_t limited = 0;
  for (const tp::HostKey& key : tp::host_keys()) {
    if (!key.limit) continue;
    ++limited;
    const tp::KeyLimit& limit = *key.limit;
    std::vector<double> outside = {limit.low_inclusive ? limit.low - 1 : limit.low};
    if (limit.below) outside.push_back(*limit.below);
    for (const double value : outside) {
      const std::string literal = key.spec.type == tp::ValueType::Int
                                      ? std::to_string(static_cast<int64_t>(value))
                                      : std::to_string(value);
      const std::string set = key.spec.path + "=" + literal;
      CAPTURE(set);
      const tp::ConfigError e =
          tp::test::expect_config_error([&] { (void)load_text(kRequiredComponents, {set}); });
      CHECK(e.key_path() == key.spec.path);
      TP_CHECK_CONTAINS(std::string(e.what()), key.spec.path + ": must be ");
    }
  }
  CHECK(limited >= 20); // the semantic limits moved into the table; none lost on the way
}

TEST_CASE("[schedule] loads straight into SchedulerOptions, with the scheduler's own defaults") {
  tp::SchedulerOptions expected; // make_scheduler's defaults (PyTorch's)
  // Where PyTorch has no default the key has one: max_lr 0 means optim.lr (the trainer scales it
  // per parameter group) and gamma is 0.1 (step and multistep use 0.1 without it too).
  expected.max_lr = {0.0};
  expected.gamma = 0.1;
  CHECK(load_text(kRequiredComponents).schedule == expected);

  const tp::RunConfig cfg = load_text("[schedule]\nname = \"one_cycle\"\nmin_lr = 1e-5\nmax_lr = 0.1\n"
                                      "base_momentum = 0.8\nmax_momentum = 0.9\nmilestones = [3, 7]\n" +
                                      kRequiredComponents);
  CHECK(cfg.schedule.name == "one_cycle");
  CHECK(cfg.schedule.min_lr == std::vector<double>{1e-5}); // one value for every parameter group
  CHECK(cfg.schedule.max_lr == std::vector<double>{0.1});
  CHECK(cfg.schedule.base_momentum == std::vector<double>{0.8});
  CHECK(cfg.schedule.max_momentum == std::vector<double>{0.9});
  CHECK(cfg.schedule.milestones == std::vector<int64_t>{3, 7});
}

}  // namespace
