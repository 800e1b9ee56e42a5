// Helpers shared by the config tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tp/framework/config/load.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace tp::test {

/// The three required component tables; tests append them after their own sections.
inline const std::string kRequiredComponents =
    "[model]\ncomponent = \"m\"\n[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n";

/// Loads `text` as "run.toml".
inline RunConfig load_text(const std::string& text, const std::vector<std::string>& sets = {},
                           const std::map<std::string, std::string>& env = {}) {
  return load_run_config_from_string(text, "run.toml", sets, env);
}

/// Runs `fn`, which must throw tp::ConfigError, and returns the error.
template <typename Fn>
ConfigError expect_config_error(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    CHECK_MESSAGE(std::string(e.what()).find('\n') == std::string::npos,
                  "a message is one paragraph: " << e.what());
    return e;
  }
  FAIL("expected a tp::ConfigError");
  return ConfigError("", "");
}

/// True when `text` contains `part`; doctest prints both on failure through CHECK_MESSAGE.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tp::test

/// CHECKs that `message` contains `part`, printing the message when it does not.
#define TP_CHECK_CONTAINS(message, part) \
  CHECK_MESSAGE(::tp::test::contains((message), (part)), "message: " << (message))
