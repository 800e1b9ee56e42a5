// configs/reference.toml and the key schema must list the same host keys with the same defaults.
#include <set>

#include "tp/framework/config/load.h"
#include "tp/framework/config/schema.h"
#include "tp/framework/config/value.h"

#include "unit/config/config_test_util.h"
#include "support/test_paths.h"

namespace {

const std::string kReference = std::string(tp::test::source_dir()) + "/configs/reference.toml";

/// Host key paths present in `table` (`prefix` its path, "" for the root): every value of every
/// section and of the tables inside one ([logging.mlflow]), component tables excluded.
void add_host_paths(const toml::table& table, const std::string& prefix, std::set<std::string>& paths) {
  for (const auto& [key, node] : table) {
    const std::string path = prefix + std::string(key.str());
    if (tp::find_component_slot(path) != nullptr) continue;
    if (const toml::table* inner = node.as_table()) add_host_paths(*inner, path + ".", paths);
    else paths.insert(path);
  }
}

std::set<std::string> host_paths_in(const toml::table& root) {
  std::set<std::string> paths;
  add_host_paths(root, "", paths);
  return paths;
}

TEST_CASE("reference.toml lists exactly the host keys of the schema, with their defaults") {
  const toml::table reference = toml::parse_file(kReference);
  const std::set<std::string> in_file = host_paths_in(reference);
  std::set<std::string> in_schema;
  for (const tp::KeySpec& spec : tp::host_key_schema()) in_schema.insert(spec.path);

  for (const std::string& path : in_schema) {
    CHECK_MESSAGE(in_file.count(path) == 1, "reference.toml lacks host key " << path);
  }
  for (const std::string& path : in_file) {
    CHECK_MESSAGE(in_schema.count(path) == 1, "reference.toml has " << path
                                                  << ", which host_key_schema() lacks");
  }

  for (const tp::KeySpec& spec : tp::host_key_schema()) {
    const toml::node* node = reference.at_path(spec.path).node();
    if (node == nullptr) continue; // reported above
    toml::table expected;
    toml::table actual;
    REQUIRE(tp::parse_value_into(expected, "v", spec.default_literal, "schema"));
    actual.insert("v", *node);
    tp::coerce_to_type(expected, "v", spec.type);
    tp::coerce_to_type(actual, "v", spec.type);
    CHECK_MESSAGE(expected == actual, spec.path << ": reference.toml says "
                                                << tp::describe_node(*node) << ", the schema "
                                                << spec.default_literal);
  }
}

TEST_CASE("reference.toml loads cleanly and equals the defaults") {
  const tp::RunConfig cfg = tp::load_run_config(kReference, {}, {});
  CHECK(cfg.model.component == "org.torchhost.small_cnn");
  CHECK(cfg.loss.component == "org.torchhost.cross_entropy");
  CHECK(cfg.data.train.component == "org.torchhost.shapes");
  REQUIRE(cfg.metrics.size() == 1);
  CHECK(cfg.metrics[0].component == "org.torchhost.accuracy");

  const tp::RunConfig defaults = tp::test::load_text(
      "[model]\ncomponent = \"org.torchhost.small_cnn\"\n"
      "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n"
      "[data.train]\ncomponent = \"org.torchhost.shapes\"\n"
      "[[metrics]]\ncomponent = \"org.torchhost.accuracy\"\n");
  CHECK(cfg.resolved == defaults.resolved);
  CHECK(cfg.run == defaults.run);
  CHECK(cfg.train == defaults.train);
  CHECK(cfg.optim == defaults.optim);
}

}  // namespace
