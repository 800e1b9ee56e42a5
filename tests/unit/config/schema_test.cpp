// The host key schema and plugin_schema().
#include <set>

#include "tp/framework/config/schema.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"

#include "unit/config/config_test_util.h"

namespace {

tp_config_key_t key(const char* name, int32_t type, const char* default_value,
                    const char* help = "help") {
  return tp_config_key_t{sizeof(tp_config_key_t), name, type, default_value, help};
}

/// The PluginLoadError message of converting `keys`, or "" when it does not throw.
std::string load_error(const std::vector<tp_config_key_t>& keys) {
  try {
    tp::plugin_schema(keys.data(), static_cast<uint32_t>(keys.size()), "org.test.model");
  } catch (const tp::PluginLoadError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("host schema: unique paths, parsable defaults, allowed default choices") {
  std::set<std::string> paths;
  for (const tp::KeySpec& spec : tp::host_key_schema()) {
    CAPTURE(spec.path);
    CHECK(paths.insert(spec.path).second);
    CHECK(spec.path.find('.') != std::string::npos);
    CHECK_FALSE(spec.help.empty());
    CHECK_FALSE(spec.default_literal.empty()); // every host key has a default
    toml::table scratch;
    REQUIRE(tp::parse_value_into(scratch, "v", spec.default_literal, "test"));
    CHECK(tp::matches_type(*scratch.get("v"), spec.type));
    if (scratch.get("v")->is_string()) {
      CHECK(tp::choice_allows(spec, scratch.get("v")->as_string()->get()));
      if (spec.kind != nullptr) CHECK(spec.kind->accepts(scratch.get("v")->as_string()->get()));
    }
    if (spec.kind != nullptr) {
      // A kind is a String's; its example is a good value other than the default (tests and
      // messages use it).
      CHECK(spec.type == tp::ValueType::String);
      CHECK(spec.choices.empty()); // the kind's forms are the choices
      toml::table example;
      REQUIRE(tp::parse_value_into(example, "v", spec.kind->example, "test"));
      REQUIRE(example.get("v")->is_string());
      CHECK(spec.kind->accepts(example.get("v")->as_string()->get()));
      CHECK(spec.kind->example != spec.default_literal);
    }
    CHECK(tp::find_host_key(spec.path) == &spec);
  }
  CHECK(paths.size() == tp::host_key_schema().size()); // no duplicate paths
  CHECK(tp::find_host_key("train.nope") == nullptr);
  CHECK(tp::find_host_key("model") == nullptr);
}

TEST_CASE("component slots and environment mirror names") {
  REQUIRE(tp::find_component_slot("data.train") != nullptr);
  CHECK(tp::find_component_slot("data.train")->required);
  CHECK_FALSE(tp::find_component_slot("data.val")->required);
  CHECK(tp::find_component_slot("metrics")->array);
  CHECK(tp::find_component_slot("data") == nullptr);
  CHECK(tp::env_mirror_name("train.batch_size") == "TP_TRAIN_BATCH_SIZE");
  CHECK(tp::env_mirror_name("data.val_from_train") == "TP_DATA_VAL_FROM_TRAIN");
}

TEST_CASE("plugin_schema converts a declared schema") {
  const std::vector<tp_config_key_t> keys = {
      key("width", TP_CFG_INT, "32", "channels"),     key("scale", TP_CFG_FLOAT, "1"),
      key("act", TP_CFG_STRING, "\"relu\""),          key("classes", TP_CFG_INT, nullptr),
      key("sizes", TP_CFG_INT_ARRAY, "[1, 2]"),        key("betas", TP_CFG_FLOAT_ARRAY, "[]"),
      key("names", TP_CFG_STRING_ARRAY, "[\"a\"]"),  key("flag", TP_CFG_BOOL, "false", nullptr),
      key("root", TP_CFG_PATH, "\"\"")};
  const std::vector<tp::KeySpec> schema =
      tp::plugin_schema(keys.data(), static_cast<uint32_t>(keys.size()), "org.test.model");
  REQUIRE(schema.size() == keys.size());
  CHECK(schema[0].path == "width");
  CHECK(schema[0].type == tp::ValueType::Int);
  CHECK(schema[0].default_literal == "32");
  CHECK(schema[0].help == "channels");
  CHECK(schema[1].type == tp::ValueType::Float);
  CHECK(schema[2].default_literal == "\"relu\"");
  CHECK(schema[3].default_literal.empty()); // NULL default = required
  CHECK(schema[4].type == tp::ValueType::IntArray);
  CHECK(schema[5].type == tp::ValueType::FloatArray);
  CHECK(schema[6].type == tp::ValueType::StringArray);
  CHECK(schema[7].type == tp::ValueType::Bool);
  CHECK(schema[7].help.empty());
  CHECK(schema[8].type == tp::ValueType::String);  // a path is a string the host resolves
  CHECK(schema[8].is_path);
  CHECK_FALSE(schema[2].is_path);
  CHECK(tp::plugin_schema(nullptr, 0, "org.test.model").empty());
}

TEST_CASE("plugin_schema reads entries with the plugin's stride") {
  struct Longer {
    tp_config_key_t key;
    uint64_t added_later;
  };
  Longer keys[2] = {{key("a", TP_CFG_INT, "1"), 7}, {key("b", TP_CFG_BOOL, "true"), 7}};
  keys[0].key.struct_size = keys[1].key.struct_size = sizeof(Longer);
  const std::vector<tp::KeySpec> schema = tp::plugin_schema(&keys[0].key, 2, "org.test.model");
  REQUIRE(schema.size() == 2);
  CHECK(schema[1].path == "b");
  CHECK(schema[1].type == tp::ValueType::Bool);
}

TEST_CASE("plugin_schema rejects bad declarations, naming component and key") {
  SUBCASE("default of the wrong type") {
    const std::string message = load_error({key("width", TP_CFG_INT, "\"wide\"")});
    TP_CHECK_CONTAINS(message, "'org.test.model'");
    TP_CHECK_CONTAINS(message, "'width'");
    TP_CHECK_CONTAINS(message, "is a string");
  }
  SUBCASE("default that is not TOML") {
    const std::string message = load_error({key("act", TP_CFG_STRING, "relu")});
    TP_CHECK_CONTAINS(message, "'act'");
    TP_CHECK_CONTAINS(message, "not a TOML value");
  }
  SUBCASE("float array default with a string") {
    TP_CHECK_CONTAINS(load_error({key("b", TP_CFG_FLOAT_ARRAY, "[0.5, \"x\"]")}), "'b'");
  }
  SUBCASE("empty default literal") {
    TP_CHECK_CONTAINS(load_error({key("w", TP_CFG_INT, "")}), "'w'");
  }
  SUBCASE("unknown type") {
    TP_CHECK_CONTAINS(load_error({key("w", 99, "1")}), "unknown type 99");
  }
  SUBCASE("duplicate") {
    TP_CHECK_CONTAINS(load_error({key("w", TP_CFG_INT, "1"), key("w", TP_CFG_INT, "2")}),
                      "'w' twice");
  }
  SUBCASE("empty, NULL and non-bare names") {
    TP_CHECK_CONTAINS(load_error({key("", TP_CFG_INT, "1")}), "'#0'");
    TP_CHECK_CONTAINS(load_error({key("a", TP_CFG_INT, "1"), key(nullptr, TP_CFG_INT, "1")}),
                      "'#1'");
    TP_CHECK_CONTAINS(load_error({key("a b", TP_CFG_INT, "1")}), "invalid name");
  }
  SUBCASE("reserved name") {
    TP_CHECK_CONTAINS(load_error({key("component", TP_CFG_STRING, "\"x\"")}), "reserved");
  }
  SUBCASE("struct_size too small") {
    std::vector<tp_config_key_t> keys = {key("w", TP_CFG_INT, "1")};
    keys[0].struct_size = 8;
    TP_CHECK_CONTAINS(load_error(keys), "struct_size 8");
  }
  SUBCASE("NULL array with a count") {
    CHECK_THROWS_AS(tp::plugin_schema(nullptr, 2, "org.test.model"), tp::PluginLoadError);
  }
}

}  // namespace
