// optim.lr_base (timm's --lr-base, docs/optimizers.md): the lr from the global batch, with timm
// train.py's rule (timm 1.0: `batch_ratio = global_batch_size / args.lr_base_size`, its square
// root when `lr_base_scale` is 'sqrt' or, left empty, for an optimizer whose name holds 'ada' or
// 'lamb'; `args.lr = args.lr_base * batch_ratio`), applied only when --lr is not given.
#include <string>

#include "tp/framework/config/load.h"
#include "tp/framework/config/lr_base.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/config/write.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::expect_config_error;
using tp::test::kRequiredComponents;
using tp::test::load_text;

tp::RunConfig with(const std::string& optim, const std::string& train = "batch_size = 128\n") {
  return load_text("[train]\n" + train + "[optim]\n" + optim + kRequiredComponents);
}

}  // namespace

TEST_CASE("lr_base: timm's rule, sqrt for adam, adamw and lamb, linear for sgd, rmsprop and lion; lr_base_scale overrides it") {
  // 128 per rank on 8 ranks: a global batch of 1024, four times lr_base_size.
  struct Case {
    std::string optim;
    double lr;
  };
  for (const Case& c : {Case{"name = \"adamw\"\nlr_base = 5e-4\n", 1e-3}, Case{"name = \"adam\"\nlr_base = 5e-4\n", 1e-3},
                        Case{"name = \"lamb\"\nlr_base = 5e-3\n", 1e-2}, Case{"name = \"sgd\"\nlr_base = 0.1\n", 0.4},
                        Case{"name = \"rmsprop\"\nlr_base = 0.01\n", 0.04}, Case{"name = \"lion\"\nlr_base = 1e-4\n", 4e-4},
                        Case{"name = \"adamw\"\nlr_base = 5e-4\nlr_base_scale = \"linear\"\n", 2e-3},
                        Case{"name = \"sgd\"\nlr_base = 0.1\nlr_base_scale = \"sqrt\"\n", 0.2},
                        Case{"name = \"sgd\"\nlr_base = 0.1\nlr_base_size = 512\n", 0.2}}) {
    CAPTURE(c.optim);
    tp::RunConfig cfg = with(c.optim);
    const auto line = tp::apply_lr_base(cfg.optim, cfg.train, 8);
    REQUIRE(line.has_value());
    CHECK(cfg.optim.lr == doctest::Approx(c.lr).epsilon(1e-15));
    CHECK(line->find("timm's --lr-base") != std::string::npos);
  }
  // Accumulation counts in the global batch, as timm's grad_accum_steps: 32 x 2 ranks x 4 = 256.
  tp::RunConfig accumulated = with("name = \"sgd\"\nlr_base = 0.1\n", "batch_size = 32\ngrad_accum_steps = 4\n");
  CHECK(tp::global_batch(accumulated.train, 2) == 256);
  REQUIRE(tp::apply_lr_base(accumulated.optim, accumulated.train, 2));
  CHECK(accumulated.optim.lr == doctest::Approx(0.1).epsilon(1e-15));
}

TEST_CASE("lr_base = 0 (the default) leaves optim.lr as given") {
  tp::RunConfig cfg = with("name = \"sgd\"\nlr = 0.05\n");
  CHECK_FALSE(tp::apply_lr_base(cfg.optim, cfg.train, 8).has_value());
  CHECK(cfg.optim.lr == 0.05);
  CHECK(tp::to_toml_text(cfg.resolved).find("lr = 0.05") != std::string::npos);
}

TEST_CASE("lr_base beside a given optim.lr is refused naming both; alone, config.toml keeps lr_base and no lr") {
  const tp::ConfigError both = expect_config_error([] { with("lr = 0.05\nlr_base = 0.1\n"); });
  CHECK(both.key_path() == "optim.lr");
  TP_CHECK_CONTAINS(std::string(both.what()), "optim.lr and optim.lr_base are both set");
  const tp::ConfigError by_set =
      expect_config_error([] { load_text("[optim]\nlr_base = 0.1\n" + kRequiredComponents, {"optim.lr=0.2"}); });
  TP_CHECK_CONTAINS(std::string(by_set.what()), "--set optim.lr=0.2");
  // The resolved file, run on another number of ranks, scales again instead of refusing.
  const tp::RunConfig alone = with("lr_base = 0.1\n");
  const std::string resolved = tp::to_toml_text(alone.resolved);
  TP_CHECK_CONTAINS(resolved, "lr_base = 0.1");
  const toml::table parsed = tp::parse_toml(resolved);
  CHECK(parsed.at_path("optim.lr").node() == nullptr);
  const tp::RunConfig again = load_text(resolved);
  CHECK(again.optim.lr_base == 0.1);
}
