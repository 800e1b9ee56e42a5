// Value kinds (docs/config_keys.md, "Value kinds"): the parsers, and that a key of a kind is parsed
// when the config is loaded: a malformed value is a ConfigError then, naming the key, the value and
// a good example, and a good one is stored parsed in RunConfig.
#include <optional>
#include <string>

#include "tp/framework/config/value_kinds.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::expect_config_error;
using tp::test::kRequiredComponents;
using tp::test::load_text;

TEST_CASE("durations: [D:]HH:MM:SS in seconds, \"\" = none, anything else refused") {
  CHECK(tp::try_parse_duration("") == 0.0);
  CHECK(tp::try_parse_duration("01:30:00") == 5400.0);
  CHECK(tp::try_parse_duration("00:00:02") == 2.0);
  CHECK(tp::try_parse_duration("100:00:00") == 360000.0); // hours may exceed a day without a day field
  CHECK(tp::try_parse_duration("2:00:00:00") == 172800.0);
  CHECK(tp::try_parse_duration("1:23:59:59") == 86400.0 + 86399.0);
  for (const char* bad : {"abc", "1h30m", "90 minutes", "90", "01:30", "00:60:00", "00:00:60", "1:24:00:00",
                          "00:00:00", "1:2:3:4:5", "01:30:", ":01:30", "01::30", "-1:00:00", "01:30:0x",
                          "1234567:00:00", " 01:30:00"}) {
    CAPTURE(bad);
    CHECK_FALSE(tp::try_parse_duration(bad).has_value());
  }
  const tp::ConfigError e = expect_config_error([] { tp::parse_duration("abc", "train.max_time"); });
  CHECK(e.key_path() == "train.max_time");
  TP_CHECK_CONTAINS(std::string(e.what()), "train.max_time: got \"abc\", which is not a duration");
  TP_CHECK_CONTAINS(std::string(e.what()), "e.g. train.max_time = \"01:30:00\"");
}

TEST_CASE("precisions, devices and byte sizes") {
  CHECK(tp::try_parse_precision("bf16") == tp::Precision::Bf16);
  CHECK_FALSE(tp::try_parse_precision("BF16").has_value());
  for (tp::Precision p : {tp::Precision::Fp32, tp::Precision::Fp16, tp::Precision::Bf16})
    CHECK(tp::try_parse_precision(tp::to_string(p)) == p);

  using Type = tp::DeviceSpec::Type;
  CHECK(tp::try_parse_device("auto") == tp::DeviceSpec{Type::Auto, std::nullopt});
  CHECK(tp::try_parse_device("cpu") == tp::DeviceSpec{Type::Cpu, std::nullopt});
  CHECK(tp::try_parse_device("cuda") == tp::DeviceSpec{Type::Cuda, std::nullopt});
  CHECK(tp::try_parse_device("cuda:12") == tp::DeviceSpec{Type::Cuda, 12});
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:1a", "CPU", "cpu:0", "cuda:-1", ""}) {
    CAPTURE(bad);
    CHECK_FALSE(tp::try_parse_device(bad).has_value());
  }
  const tp::ConfigError device = expect_config_error([] { tp::parse_device("gpu", "--devices"); });
  CHECK(device.key_path() == "--devices");
  TP_CHECK_CONTAINS(std::string(device.what()), "--devices: got \"gpu\", which is not a device");
  TP_CHECK_CONTAINS(std::string(device.what()), "e.g. --devices cuda:0."); // an option's example has no quotes

  CHECK(tp::try_parse_byte_size("4GiB") == 4.0 * (1 << 30));
  CHECK(tp::try_parse_byte_size("512 MiB") == 512.0 * (1 << 20));
  CHECK(tp::try_parse_byte_size("1.5GB") == 1.5e9);
  CHECK(tp::try_parse_byte_size("8g") == 8.0 * (1 << 30));
  CHECK(tp::try_parse_byte_size("2000000000") == 2e9);
  for (const char* bad : {"", "GiB", "4 lots", "-1GiB", "0", "nan", "inf", "4GiBs"}) {
    CAPTURE(bad);
    CHECK_FALSE(tp::try_parse_byte_size(bad).has_value());
  }
}

/// The error of loading `text` (components appended) with `sets`.
tp::ConfigError load_error(const std::string& text, const std::vector<std::string>& sets = {}) {
  return expect_config_error([&] { (void)load_text(text + kRequiredComponents, sets); });
}

TEST_CASE("a malformed value of a kind is a ConfigError at load time naming the key, the value and an example") {
  const tp::ConfigError time = load_error("[train]\nmax_time = \"1h30m\"\n");
  CHECK(time.key_path() == "train.max_time");
  TP_CHECK_CONTAINS(std::string(time.what()), "run.toml:2:12: train.max_time: got \"1h30m\", which is not a duration");
  TP_CHECK_CONTAINS(std::string(time.what()), "\"HH:MM:SS\" or \"D:HH:MM:SS\"");
  TP_CHECK_CONTAINS(std::string(time.what()), "e.g. train.max_time = \"01:30:00\"");

  const tp::ConfigError time_set = load_error("", {"train.max_time=abc"}); // not TOML: taken as a string
  CHECK(time_set.key_path() == "train.max_time");
  TP_CHECK_CONTAINS(std::string(time_set.what()), "--set train.max_time=abc: train.max_time: got \"abc\"");

  const tp::ConfigError precision = load_error("[amp]\nprecision = \"fp61\"\n");
  CHECK(precision.key_path() == "amp.precision");
  TP_CHECK_CONTAINS(std::string(precision.what()), "run.toml:2:13: amp.precision: got \"fp61\", which is not a precision");
  TP_CHECK_CONTAINS(std::string(precision.what()), "e.g. amp.precision = \"bf16\"");

  const tp::ConfigError device = load_error("", {"run.device=gpu"});
  CHECK(device.key_path() == "run.device");
  TP_CHECK_CONTAINS(std::string(device.what()), "run.device: got \"gpu\", which is not a device");
  TP_CHECK_CONTAINS(std::string(device.what()), "e.g. run.device = \"cuda:0\"");

  const tp::ConfigError env = expect_config_error(
      [] { (void)load_text(kRequiredComponents, {}, {{"TP_TRAIN_MAX_TIME", "soon"}}); });
  CHECK(env.key_path() == "train.max_time");
  TP_CHECK_CONTAINS(std::string(env.what()), "environment variable TP_TRAIN_MAX_TIME");

  // The type comes first: a number is not a string of any kind.
  const tp::ConfigError number = load_error("[train]\nmax_time = 90\n");
  TP_CHECK_CONTAINS(std::string(number.what()), "expected a string, got an integer");
}

TEST_CASE("a good value of a kind is stored parsed in RunConfig") {
  const tp::RunConfig defaults = load_text(kRequiredComponents);
  CHECK(defaults.train.max_time.empty());
  CHECK(defaults.train.max_time_seconds == 0.0);
  CHECK(defaults.amp.precision == tp::Precision::Fp32);
  CHECK(defaults.run.device == "auto");

  const tp::RunConfig set = load_text("[train]\nmax_time = \"1:02:00:30\"\n[amp]\nprecision = \"bf16\"\n" +
                                          kRequiredComponents,
                                      {"run.device=cuda:3"});
  CHECK(set.train.max_time == "1:02:00:30"); // the text as written, for messages
  CHECK(set.train.max_time_seconds == 86400.0 + 7200.0 + 30.0);
  CHECK(set.amp.precision == tp::Precision::Bf16);
  CHECK(set.run.device == "cuda:3");
  CHECK(tp::parse_device(set.run.device, "run.device") == tp::DeviceSpec{tp::DeviceSpec::Type::Cuda, 3});
  // The resolved table (config.toml in the run directory) keeps the spelling.
  CHECK(set.resolved.at_path("amp.precision").value<std::string>() == "bf16");
  CHECK(set.resolved.at_path("train.max_time").value<std::string>() == "1:02:00:30");
}

TEST_CASE("train.grad_accum_steps is checked once, at load time: >= 1") {
  for (const char* bad : {"0", "-2"}) {
    CAPTURE(bad);
    const tp::ConfigError e = load_error("", {std::string("train.grad_accum_steps=") + bad});
    CHECK(e.key_path() == "train.grad_accum_steps");
    TP_CHECK_CONTAINS(std::string(e.what()), "train.grad_accum_steps: must be >= 1");
  }
  CHECK(load_text(kRequiredComponents, {"train.grad_accum_steps=4"}).train.grad_accum_steps == 4);
}

}  // namespace
