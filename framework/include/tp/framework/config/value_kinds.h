// Value kinds: string values with a syntax of their own (a duration, a device, a precision, a
// byte size), parsed by the config layer.
//
// A host key of a kind is a TOML string whose text must also parse as that kind. The row of the
// key table declares it (host_keys.cpp: `.kind = &duration_kind()`, or implied by the member's
// type: a `Precision` member is a precision key), validate_host_table() parses it when the
// config is loaded, before anything is created or written, and the parsed value is stored in
// RunConfig (amp.precision as a `Precision`, train.max_time's seconds in
// `train.max_time_seconds`). A malformed value is a ConfigError naming the key, the value and a
// good example (value_kind_message()). Command-line options of the same kinds (--memory-limit)
// use the same parsers. docs/config_keys.md, "Value kinds".
//
// No LibTorch here (ARCH-1): a device is its spelling (DeviceSpec); whether it exists on this
// machine is checked at start-up (resolve_device), and so is whether a precision runs on it
// (check_precision_supported).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tp {

/// One value kind, for validation and messages.
struct ValueKind {
  std::string_view name;    ///< "a duration", with its article, for "... is not a duration"
  std::string_view forms;   ///< what is accepted: "\"HH:MM:SS\" or \"D:HH:MM:SS\", or \"\" for none"
  std::string_view example; ///< a valid TOML literal, not the key's default: "\"01:30:00\""
  bool (*accepts)(std::string_view text); ///< whether `text` parses as this kind
};

/// "<key>: got \"<text>\", which is not <name>; expected <forms>, e.g. <key> = <example>." (an
/// option: "e.g. --memory-limit 4GiB"). The one message for a malformed value of a kind, at load
/// time (validate_host_table() puts where the value came from in front) and from the parse_*
/// functions below.
std::string value_kind_message(const ValueKind& kind, std::string_view key, std::string_view text);

// ~~~~ Duration ~~~~

/// "[D:]HH:MM:SS": train.max_time.
const ValueKind& duration_kind();

/// Seconds in a "[D:]HH:MM:SS" duration ("01:30:00", "2:00:00:00"); "" = 0 (none). nullopt for
/// anything else: fields not digits or missing, minutes or seconds >= 60, hours >= 24 after a
/// day field, or a zero duration.
std::optional<double> try_parse_duration(std::string_view text);

/// As try_parse_duration(); throws ConfigError at `key` (value_kind_message()) for anything else.
/// Example:
///   parse_duration("01:30:00", "train.max_time");  // 5400.0
double parse_duration(std::string_view text, std::string_view key);

// ~~~~ Precision ~~~~

/// The precision of the forward pass (amp.precision; tp/framework/amp/precision.h has what each
/// means for autocast and grad scaling).
enum class Precision {
  Fp32,  ///< no autocast, no grad scaling
  Fp16,  ///< autocast to float16; use a GradScaler
  Bf16,  ///< autocast to bfloat16; no GradScaler needed
};

/// "fp32" | "fp16" | "bf16": amp.precision.
const ValueKind& precision_kind();

/// Exactly "fp32", "fp16" or "bf16"; nullopt for anything else (case matters).
std::optional<Precision> try_parse_precision(std::string_view text);

/// As try_parse_precision(); throws ConfigError (key "amp.precision") for anything else.
Precision parse_precision(std::string_view text);

/// The config spelling of `precision` ("fp32", "fp16", "bf16").
std::string_view to_string(Precision precision) noexcept;

// ~~~~ Device ~~~~

/// A device as written in run.device: its type and, for "cuda:N", the index.
struct DeviceSpec {
  enum class Type { Auto, Cpu, Cuda };
  Type type = Type::Auto;
  std::optional<int64_t> index; ///< N of "cuda:N"; absent for "cuda" (the current device), cpu, auto
  bool operator==(const DeviceSpec&) const = default; ///< field-wise
};

/// "auto" | "cpu" | "cuda" | "cuda:N": run.device.
const ValueKind& device_kind();

/// "auto", "cpu", "cuda" or "cuda:N" (N decimal digits, at most 6); nullopt for anything else.
/// Only the spelling: whether the device exists is resolve_device()'s check at start-up.
std::optional<DeviceSpec> try_parse_device(std::string_view text);

/// As try_parse_device(); throws ConfigError at `key` for anything else.
DeviceSpec parse_device(std::string_view text, std::string_view key);

// ~~~~ Byte size ~~~~

/// "4GiB", "512 MiB", "1.5GB", "8g", "2000000000": sizes of memory (--memory-limit).
const ValueKind& byte_size_kind();

/// Bytes in a positive number with an optional unit, case-insensitive, optionally after a space:
/// KiB/MiB/GiB/TiB and K/M/G/T alone are binary (as ulimit and Docker read them), KB/MB/GB/TB
/// decimal, B or none bytes. nullopt for anything else or a size that is not positive.
std::optional<double> try_parse_byte_size(std::string_view text);

/// As try_parse_byte_size(); throws ConfigError at `key` ("--memory-limit") for anything else.
double parse_byte_size(std::string_view text, std::string_view key);

}  // namespace tp
