// Fuzz target: validation of a plugin's declared config schema (tp_config_key_t entries behind a
// valid entry symbol) and of a component table against it. The input bytes become the entries'
// integer fields and strings; every input must yield a schema or tp::PluginLoadError, and a
// table checked against a valid schema yields options or tp::ConfigError.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tp/framework/config/schema.h"
#include "tp/framework/config/validate.h"
#include "tp/framework/error.h"

namespace {

/// Consumes the input front to back; past the end everything reads as zero / empty.
struct Reader {
  const uint8_t* data;
  size_t size;
  uint32_t u32() {
    uint32_t v = 0;
    const size_t n = size < sizeof v ? size : sizeof v;
    std::memcpy(&v, data, n);
    data += n;
    size -= n;
    return v;
  }
  std::string text() {
    const size_t length = size == 0 ? 0 : data[0] % 24;
    const size_t n = size == 0 ? 0 : (length + 1 < size ? length : size - 1);
    std::string s = size == 0 ? std::string() : std::string(reinterpret_cast<const char*>(data + 1), n);
    const size_t used = size == 0 ? 0 : n + 1;
    data += used;
    size -= used;
    return s;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  const uint32_t count = in.u32() % 6;
  std::vector<std::string> strings;
  strings.reserve(3 * count + 1);
  std::vector<tp_config_key_t> keys(count);
  for (tp_config_key_t& key : keys) {
    const uint32_t flags = in.u32();
    key.struct_size = (flags & 1) != 0 ? in.u32() % (2 * sizeof(tp_config_key_t)) : sizeof(tp_config_key_t);
    if ((flags & 8) == 0 && &key != &keys[0]) key.struct_size = keys[0].struct_size; // usually consistent
    key.type = static_cast<int32_t>(in.u32() % 10) - 1;
    strings.push_back(in.text());
    key.name = (flags & 2) != 0 ? nullptr : strings.back().c_str();
    strings.push_back(in.text());
    key.default_value = (flags & 4) != 0 ? nullptr : strings.back().c_str();
    strings.push_back(in.text());
    key.help = strings.back().c_str();
  }
  // The ABI's array stride is keys[0].struct_size: lay the entries out at that stride, as a plugin
  // built against that header size would (a shorter struct loses its trailing fields).
  const size_t stride = count == 0 ? sizeof(tp_config_key_t)
                                   : (keys[0].struct_size < sizeof(uint32_t) ? sizeof(uint32_t) : keys[0].struct_size);
  std::vector<unsigned char> bytes(stride * count + sizeof(tp_config_key_t));
  for (uint32_t i = 0; i < count; ++i)
    std::memcpy(bytes.data() + i * stride, &keys[i], stride < sizeof keys[i] ? stride : sizeof keys[i]);
  std::vector<tp::KeySpec> schema;
  try {
    schema = tp::plugin_schema(count == 0 ? nullptr : reinterpret_cast<const tp_config_key_t*>(bytes.data()), count,
                               "org.fuzz.component");
  } catch (const tp::PluginLoadError&) {
    return 0;
  }
  // The rest of the input is a component table checked against the schema just accepted.
  tp::ComponentConfig component;
  component.component = "org.fuzz.component";
  component.key_path = "model";
  try {
    component.options = toml::parse(std::string_view(reinterpret_cast<const char*>(in.data), in.size));
  } catch (const toml::parse_error&) {
    return 0;
  }
  try {
    tp::validate_component(component, schema, "fuzz.toml");
  } catch (const tp::ConfigError&) {
  }
  return 0;
}
