#include "tp/framework/config/value_kinds.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/error.h"

namespace tp {
namespace {

bool is_digits(std::string_view text, std::size_t max_size) {
  if (text.empty() || text.size() > max_size) return false;
  for (char c : text)
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  return true;
}

int64_t to_int(std::string_view digits) {
  int64_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

/// The example literal as an option argument: "\"4GiB\"" -> "4GiB".
std::string_view unquoted(std::string_view literal) {
  if (literal.size() >= 2 && literal.front() == '"' && literal.back() == '"') return literal.substr(1, literal.size() - 2);
  return literal;
}

}  // namespace

std::string value_kind_message(const ValueKind& kind, std::string_view key, std::string_view text) {
  const std::string name(key);
  const std::string head = name + ": got \"" + std::string(text) + "\", which is not " + std::string(kind.name) +
                           "; expected " + std::string(kind.forms) + ", e.g. " + name;
  // A command-line option is written "--memory-limit 4GiB", a key "key = \"...\"".
  if (name.starts_with("--")) return head + " " + std::string(unquoted(kind.example)) + ".";
  return head + " = " + std::string(kind.example) + ".";
}

// ~~~~ Duration ~~~~

std::optional<double> try_parse_duration(std::string_view text) {
  if (text.empty()) return 0.0;
  std::vector<int64_t> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    const std::string_view field = text.substr(start, colon == std::string_view::npos ? colon : colon - start);
    if (!is_digits(field, 6)) return std::nullopt; // also an empty field: "1::00", a trailing ':'
    fields.push_back(to_int(field));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (fields.size() != 3 && fields.size() != 4) return std::nullopt;
  const std::size_t h = fields.size() - 3;
  if (fields[h + 1] >= 60 || fields[h + 2] >= 60 || (h == 1 && fields[h] >= 24)) return std::nullopt;
  const double days = h == 1 ? static_cast<double>(fields[0]) : 0.0;
  const double seconds = ((days * 24 + static_cast<double>(fields[h])) * 60 + static_cast<double>(fields[h + 1])) * 60 +
                         static_cast<double>(fields[h + 2]);
  if (seconds <= 0) return std::nullopt;
  return seconds;
}

const ValueKind& duration_kind() {
  static const ValueKind kind{"a duration",
                              "\"HH:MM:SS\" or \"D:HH:MM:SS\" (\"01:30:00\" is an hour and a half; minutes and seconds "
                              "below 60), or \"\" for none",
                              "\"01:30:00\"",
                              [](std::string_view text) { return try_parse_duration(text).has_value(); }};
  return kind;
}

double parse_duration(std::string_view text, std::string_view key) {
  if (const std::optional<double> seconds = try_parse_duration(text)) return *seconds;
  throw ConfigError(std::string(key), value_kind_message(duration_kind(), key, text));
}

// ~~~~ Precision ~~~~

std::optional<Precision> try_parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::Fp32;
  if (text == "fp16") return Precision::Fp16;
  if (text == "bf16") return Precision::Bf16;
  return std::nullopt;
}

const ValueKind& precision_kind() {
  static const ValueKind kind{"a precision", "one of \"fp32\", \"fp16\", \"bf16\"", "\"bf16\"",
                              [](std::string_view text) { return try_parse_precision(text).has_value(); }};
  return kind;
}

Precision parse_precision(std::string_view text) {
  if (const std::optional<Precision> precision = try_parse_precision(text)) return *precision;
  throw ConfigError("amp.precision", value_kind_message(precision_kind(), "amp.precision", text));
}

std::string_view to_string(Precision precision) noexcept {
  switch (precision) {
    case Precision::Fp16: return "fp16";
    case Precision::Bf16: return "bf16";
    case Precision::Fp32: break;
  }
  return "fp32";
}

// ~~~~ Device ~~~~

std::optional<DeviceSpec> try_parse_device(std::string_view text) {
  if (text == "auto") return DeviceSpec{DeviceSpec::Type::Auto, std::nullopt};
  if (text == "cpu") return DeviceSpec{DeviceSpec::Type::Cpu, std::nullopt};
  if (text == "cuda") return DeviceSpec{DeviceSpec::Type::Cuda, std::nullopt};
  constexpr std::string_view kCudaColon = "cuda:";
  if (text.starts_with(kCudaColon) && is_digits(text.substr(kCudaColon.size()), 6))
    return DeviceSpec{DeviceSpec::Type::Cuda, to_int(text.substr(kCudaColon.size()))};
  return std::nullopt;
}

const ValueKind& device_kind() {
  // "auto, cpu, cuda or cuda:N" is also how the choices of a key were listed before kinds.
  static const ValueKind kind{"a device", "auto, cpu, cuda or cuda:N (N = 0, 1, ...)", "\"cuda:0\"",
                              [](std::string_view text) { return try_parse_device(text).has_value(); }};
  return kind;
}

DeviceSpec parse_device(std::string_view text, std::string_view key) {
  if (const std::optional<DeviceSpec> device = try_parse_device(text)) return *device;
  throw ConfigError(std::string(key), value_kind_message(device_kind(), key, text));
}

// ~~~~ Byte size ~~~~

std::optional<double> try_parse_byte_size(std::string_view text) {
  const std::string copy(text);
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(copy, &used);
  } catch (const std::exception&) {
    return std::nullopt; // no number at all
  }
  std::string unit;
  for (const char c : copy.substr(used))
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  constexpr double kKi = 1024.0, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;
  static const std::vector<std::pair<std::string_view, double>> units{
      {"", 1},     {"b", 1},     {"k", kKi},   {"kib", kKi}, {"kb", 1e3}, {"m", kMi},   {"mib", kMi},
      {"mb", 1e6}, {"g", kGi},   {"gib", kGi}, {"gb", 1e9},  {"t", kTi},  {"tib", kTi}, {"tb", 1e12}};
  if (!(value > 0) || !std::isfinite(value)) return std::nullopt;
  for (const auto& [name, scale] : units)
    if (unit == name) return value * scale;
  return std::nullopt;
}

const ValueKind& byte_size_kind() {
  static const ValueKind kind{"a byte size",
                              "a positive number with a unit: KiB, MiB, GiB, TiB (or K, M, G, T: binary), KB, MB, GB, "
                              "TB (decimal), none for bytes",
                              "\"4GiB\"",
                              [](std::string_view text) { return try_parse_byte_size(text).has_value(); }};
  return kind;
}

double parse_byte_size(std::string_view text, std::string_view key) {
  if (const std::optional<double> bytes = try_parse_byte_size(text)) return *bytes;
  throw ConfigError(std::string(key), value_kind_message(byte_size_kind(), key, text));
}

}  // namespace tp
