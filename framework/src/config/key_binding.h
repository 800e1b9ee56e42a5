// How a row of the host key table (host_keys.cpp) binds a key to its RunConfig member: the key's
// value type follows from the member's C++ type, and reading and addressing the member are
// generated from the same member pointers, so they cannot disagree. Private to tp_config.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/framework/config/choices.h"
#include "tp/framework/config/host_keys.h"
#include "tp/framework/config/value_kinds.h"

namespace tp::detail {

using VT = ValueType;

/// How a member of type T is read from a value of the key's type, and that type. A member type
/// without a specialisation does not compile, so every RunConfig member type is one of these.
template <typename T>
struct Field;
template <>
struct Field<bool> {
  static constexpr VT kType = VT::Bool;
  static void read(const toml::node& value, bool& out) { out = value.value<bool>().value_or(false); }
};
template <>
struct Field<int64_t> {
  static constexpr VT kType = VT::Int;
  static void read(const toml::node& value, int64_t& out) { out = value.value<int64_t>().value_or(0); }
};
template <>
struct Field<double> {
  static constexpr VT kType = VT::Float;
  static void read(const toml::node& value, double& out) { out = value.value<double>().value_or(0.0); }
};
template <>
struct Field<std::optional<double>> {
  static constexpr VT kType = VT::Float;
  static void read(const toml::node& value, std::optional<double>& out) { out = value.value<double>(); }
};
template <>
struct Field<std::string> {
  static constexpr VT kType = VT::String;
  static void read(const toml::node& value, std::string& out) {
    out = value.value<std::string>().value_or("");
  }
};
/// A member of a value kind's own type: a String key whose text is parsed when the config is
/// loaded; the kind comes with the type, so the row need not repeat it.
template <>
struct Field<Precision> {
  static constexpr VT kType = VT::String;
  static const ValueKind* kind() { return &precision_kind(); }
  static void read(const toml::node& value, Precision& out) {
    // validate_host_table() has parsed it already, so the fallback is never taken.
    out = try_parse_precision(value.value<std::string>().value_or("")).value_or(Precision::Fp32);
  }
};
/// A member of an enumerated choice (choices.h): a String key whose allowed values are the enum's
/// config words, so the row need not list them.
template <Choice E>
struct Field<E> {
  static constexpr VT kType = VT::String;
  static std::vector<std::string> choices() { return choice_words<E>(); }
  static void read(const toml::node& value, E& out) {
    // validate_host_table() has refused any other word, so the fallback is never taken.
    out = try_parse_choice<E>(value.value<std::string>().value_or("")).value_or(ChoiceWords<E>::kWords[0].first);
  }
};
template <typename T, VT Type>
struct ArrayField {
  static constexpr VT kType = Type;
  /// An array, or (a Float key filling a "one value or per group" list) one value.
  static void read(const toml::node& value, std::vector<T>& out) {
    out.clear();
    if (const toml::array* array = value.as_array()) {
      for (const toml::node& element : *array) out.push_back(element.value<T>().value_or(T{}));
    } else if (std::optional<T> one = value.value<T>()) {
      out.push_back(*one);
    }
  }
};
template <>
struct Field<std::vector<int64_t>> : ArrayField<int64_t, VT::IntArray> {};
template <>
struct Field<std::vector<double>> : ArrayField<double, VT::FloatArray> {};
template <>
struct Field<std::vector<std::string>> : ArrayField<std::string, VT::StringArray> {};

/// The member that the member pointers `Path` lead to from `cfg` (RunConfig::train, then
/// TrainSection::batch_size).
template <auto... Path>
auto& member_of(RunConfig& cfg) {
  return (cfg .* ... .* Path);
}
template <auto... Path>
using MemberType = std::remove_reference_t<decltype(member_of<Path...>(std::declval<RunConfig&>()))>;

/// What a row declares besides its name, type, default and help; designated initializers, so
/// the fields cannot be given in the wrong order.
struct KeyRules {
  std::vector<std::string> choices = {}; ///< allowed strings; empty = any
  std::optional<KeyLimit> limit = {};    ///< numeric limit; absent = none
  bool is_path = false;                  ///< a file, resolved against the config file's directory
  const ValueKind* kind = nullptr;       ///< a String of a value kind (value_kinds.h); a Field's own kind by default
};

constexpr KeyLimit at_least(double low) { return {low, true, {}}; }
constexpr KeyLimit above(double low) { return {low, false, {}}; }
constexpr KeyLimit at_least_and_below(double low, double high) { return {low, true, high}; }
constexpr KeyLimit above_and_below(double low, double high) { return {low, false, high}; }

/// The row of a key of type `Type` that fills the member at `Path`. The member's C++ type must
/// hold that type: a mismatch (a string key on an int64_t member) does not compile.
template <VT Type, auto... Path>
HostKey typed_key(std::string path, std::string default_literal, std::string help, KeyRules rules = {}) {
  using T = MemberType<Path...>;
  static_assert(Type == Field<T>::kType || (std::is_same_v<T, std::vector<double>> && Type == VT::Float),
                "the key's type does not fit its member");
  const ValueKind* kind = rules.kind;
  if constexpr (requires { Field<T>::kind(); }) {
    if (kind == nullptr) kind = Field<T>::kind();
  }
  if constexpr (requires { Field<T>::choices(); }) {
    if (rules.choices.empty()) rules.choices = Field<T>::choices();
  }
  return {KeySpec{std::move(path), Type, std::move(default_literal), std::move(help), std::move(rules.choices),
                  rules.is_path, kind},
          rules.limit,
          [](const toml::node& value, RunConfig& cfg) { Field<T>::read(value, member_of<Path...>(cfg)); },
          [](RunConfig& cfg) -> void* { return &member_of<Path...>(cfg); }};
}

/// The row of a key whose type follows from its member's type.
template <auto... Path>
HostKey key(std::string path, std::string default_literal, std::string help, KeyRules rules = {}) {
  return typed_key<Field<MemberType<Path...>>::kType, Path...>(std::move(path), std::move(default_literal),
                                                              std::move(help), std::move(rules));
}

/// `key`, a String row of a value kind whose member keeps the text, also filling the parsed member
/// at `Path` with `Parse` of the text (train.max_time -> train.max_time_seconds, with
/// try_parse_duration). validate_host_table() has checked the text with the kind already.
template <auto Parse, auto... Path>
HostKey with_parsed(HostKey key) {
  using T = MemberType<Path...>;
  static_assert(std::is_same_v<decltype(Parse(std::string_view())), std::optional<T>>,
                "the parser does not produce the parsed member's type");
  key.read_parsed = [](const toml::node& value, RunConfig& cfg) {
    member_of<Path...>(cfg) = Parse(value.value<std::string>().value_or("")).value_or(T{});
  };
  key.parsed_member = [](RunConfig& cfg) -> void* { return &member_of<Path...>(cfg); };
  return key;
}

/// A Bool key without a member: every value but its default is refused by validate_host_table(),
/// so no code reads it (dist.sync_batchnorm).
inline HostKey refused_key(std::string path, std::string default_literal, std::string help) {
  return {KeySpec{std::move(path), VT::Bool, std::move(default_literal), std::move(help), {}}, {}, nullptr, nullptr};
}

}  // namespace tp::detail
