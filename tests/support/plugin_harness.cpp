// Shared helpers of the Tier T plugin tests (see plugin_harness.h).
#include "support/plugin_harness.h"

namespace tp::test {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
std::string unquote(const std::string& s) {
  const std::string t = trim(s);
  return t.size() >= 2 && t.front() == '"' ? t.substr(1, t.size() - 2) : t;
}
std::vector<std::string> split_array(const std::string& literal) {
  std::vector<std::string> parts;
  const std::string inner = trim(literal).substr(1, trim(literal).size() - 2);
  size_t start = 0;
  while (start < inner.size()) {
    size_t comma = inner.find(',', start);
    if (comma == std::string::npos) comma = inner.size();
    if (!trim(inner.substr(start, comma - start)).empty()) parts.push_back(trim(inner.substr(start, comma - start)));
    start = comma + 1;
  }
  return parts;
}

}  // namespace

void fill_defaults(FakeConfig& cfg, const tp_descriptor_t& d) {
  for (uint32_t i = 0; i < d.key_count; ++i) {
    const tp_config_key_t& k = d.keys[i];
    REQUIRE_MESSAGE(k.default_value != nullptr, k.name);
    const std::string v = k.default_value;
    switch (k.type) {
      case TP_CFG_BOOL: cfg.values[k.name] = v == "true"; break;
      case TP_CFG_INT: cfg.values[k.name] = int64_t{std::stoll(v)}; break;
      case TP_CFG_FLOAT: cfg.values[k.name] = std::stod(v); break;
      case TP_CFG_STRING:
      case TP_CFG_PATH: cfg.values[k.name] = unquote(v); break;
      case TP_CFG_INT_ARRAY: {
        std::vector<int64_t> out;
        for (const auto& p : split_array(v)) out.push_back(std::stoll(p));
        cfg.values[k.name] = out;
        break;
      }
      case TP_CFG_FLOAT_ARRAY: {
        std::vector<double> out;
        for (const auto& p : split_array(v)) out.push_back(std::stod(p));
        cfg.values[k.name] = out;
        break;
      }
      case TP_CFG_STRING_ARRAY: {
        std::vector<std::string> out;
        for (const auto& p : split_array(v)) out.push_back(unquote(p));
        cfg.values[k.name] = out;
        break;
      }
      default: FAIL("unknown key type " << k.type << " of " << k.name);
    }
  }
}

std::vector<StateEntry> visit_all(tp_status (*visit_state)(void*, tp_state_visitor, void*), void* self) {
  std::vector<StateEntry> out;
  const tp_status status = visit_state(
      self,
      [](void* user, const char* name, tp_tensor t, bool is_buffer) -> tp_status {
        static_cast<std::vector<StateEntry>*>(user)->push_back({name, t, is_buffer});
        return TP_OK;
      },
      &out);
  REQUIRE(status == TP_OK);
  return out;
}

}  // namespace tp::test
