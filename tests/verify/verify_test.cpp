// `host verify` end to end: every check passes on the example configs (BatchNorm reported as
// "differs by design" for accumulation), and each check fails, naming itself, with exit
// kExitVerifyFailed, on the fixture component that carries the bug it is there to catch
// (tests/fixtures/verify_plugins, docs/verify.md). The other configs: verify_configs_test.cpp.
#include <filesystem>
#include <string>

#include "verify_runner.h"

using tp::test::kFixture;
using tp::test::result_of;
using tp::test::row_of;
using tp::test::verify;

TEST_CASE("host verify passes on configs/quickstart.toml; BatchNorm differs by design in accumulation") {
  const auto run = verify("verify_quickstart", "--config configs/quickstart.toml --steps 2");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  for (const char* check :
       {"data", "loss", "metric", "gradients", "accumulation", "resume", "distributed", "overfit"}) {
    INFO(check);
    CHECK(result_of(run.output, check) == "PASS");
  }
  // small_cnn has BatchNorm: the live difference is reported, the exact check runs frozen.
  CHECK(row_of(run.output, "accumulation").find("differs by design") != std::string::npos);
  CHECK(row_of(run.output, "accumulation").find("freeze_bn_stats") != std::string::npos);
  // shapes augments by the per-sample seed, which mixes in the rank.
  CHECK(row_of(run.output, "distributed").find("differs by design") != std::string::npos);
  CHECK(run.output.find("8 passed, 0 failed, 0 skipped") != std::string::npos);
  // Without augmentation the 2-rank training is judged, and exact.
  const auto plain = verify("verify_quickstart_plain", "--config configs/quickstart.toml --steps 2 --checks distributed "
                                                       "--set data.train.augment=false");
  INFO(plain.output);
  CHECK(plain.exit_code == tp::kExitOk);
  CHECK(row_of(plain.output, "distributed").find("training differs by design") == std::string::npos);
}

TEST_CASE("host verify passes on configs/multi_input.toml and configs/multi_output.toml") {
  // Two inputs, two outputs: every field and output is split and compared. The overfit check,
  // which does not look at fields, runs on quickstart only (about 10 s each here).
  for (const char* config : {"multi_input", "multi_output"}) {
    const auto run = verify(std::string("verify_") + config,
                            std::string("--config configs/") + config +
                                ".toml --steps 2 --checks data,loss,metric,gradients,accumulation,resume,distributed");
    INFO(run.output);
    CHECK(run.exit_code == tp::kExitOk);
    CHECK(run.output.find("7 passed, 0 failed, 0 skipped") != std::string::npos);
  }
}

TEST_CASE("the fixture's correct components pass every check") {
  const auto run = verify("verify_fixture_clean", kFixture + "--steps 2");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  CHECK(run.output.find("8 passed, 0 failed, 0 skipped") != std::string::npos);
}

TEST_CASE("a timm-mapped schedule (warm-up and cool-down in epochs) passes: the checks' own runs reset it") {
  // Fine-tune trial F1: the checks that swap in a constant schedule, and the resume check's run of a
  // few steps, were refused over schedule.warmup_epochs / cooldown_epochs (exit 6, 3 FAIL).
  const auto run = verify("verify_fixture_timm_schedule",
                          kFixture + "--steps 2 --set train.epochs=3 --set schedule.name=\"cosine\" "
                                     "--set schedule.warmup_epochs=1 --set schedule.warmup_lr=0.01 "
                                     "--set schedule.warmup_prefix=false --set schedule.cooldown_epochs=1");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  CHECK(run.output.find("8 passed, 0 failed, 0 skipped") != std::string::npos);
  CHECK(run.output.find("configuration error") == std::string::npos);
}

TEST_CASE("each check fails on the bug it is there to catch") {
  struct Case {
    const char* check;
    const char* defect; // the --set that plants the bug
    const char* says;   // a phrase of the FAIL row
  };
  const Case cases[] = {
      {"data", "data.train.defect=\"random\"", "two reads with the same context differ"},
      {"data", "data.train.defect=\"worker\"", "differs when loader thread 2 of 3 reads it"},
      {"data", "data.train.defect=\"nan_sample\"", "NaN or Inf"},
      {"loss", "loss.defect=\"mean\"", "not a sum over its items"},
      {"loss", "loss.defect=\"zero_count\"", "must count its items"},
      {"metric", "metrics[0].defect=\"running_mean\"", "does not combine by SUM"},
      {"gradients", "model.defect=\"dead_parameter\"", "unused.weight"},
      {"gradients", "model.defect=\"nan_gradient\"", "get a NaN or Inf gradient: hidden.weight"},
      {"gradients", "model.defect=\"dead_relu\"", "get an all-zero gradient: hidden.weight"},
      {"accumulation", "loss.defect=\"mean\"", "max relative weight difference"},
      {"accumulation", "model.defect=\"batch_centering\"", "statistics over the batch outside BatchNorm"},
      {"accumulation", "model.defect=\"batch_scaled_offset\"", "max relative weight difference"},
      {"resume", "model.defect=\"hidden_state\"", "max relative difference"},
      {"distributed", "metrics[0].defect=\"running_mean\"", "evaluation: val/accuracy"},
      {"distributed", "data.train.defect=\"self_sharding\"", "2 ranks must train like 1 process"},
      {"overfit", "model.defect=\"softmax_output\"", "at best"},
  };
  for (const Case& c : cases) {
    const auto run = verify(std::string("verify_fail_") + c.check,
                            kFixture + "--steps 2 --checks " + c.check + " --set '" + c.defect + "'");
    INFO(c.check, " with ", c.defect, ":\n", run.output);
    CHECK(run.exit_code == tp::kExitVerifyFailed);
    CHECK(result_of(run.output, c.check) == "FAIL");
    CHECK(row_of(run.output, c.check).find(c.says) != std::string::npos);
    CHECK(run.output.find("0 passed, 1 failed") != std::string::npos);
  }
}

TEST_CASE("accumulation compares steps inside the first epoch only: across its end the two sides train other samples") {
  // 72 samples at 16 x 2 hold 2 full windows; at 4 x 8 the epoch closes windows of 8, 8 and 2
  // micro-batches, so steps 3 and 4 trained other samples on each side (a false FAIL before).
  const std::string sets = kFixture + "--checks accumulation --set train.grad_accum_steps=2 ";
  const auto run = verify("verify_accumulation_epoch", sets + "--steps 4 --set data.train.size=72");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  CHECK(result_of(run.output, "accumulation") == "PASS");
  CHECK(row_of(run.output, "accumulation")
            .find("2 steps of plain SGD at batch 16 x 2 against 4 x 8 (not --steps 4: the first epoch of 72 samples "
                  "holds 2 full window(s)") != std::string::npos);
  // 24 samples hold no window of 16 x 2: nothing the two sides would both train on.
  const auto small = verify("verify_accumulation_no_window", sets + "--set data.train.size=24");
  INFO(small.output);
  CHECK(small.exit_code == tp::kExitOk);
  CHECK(result_of(small.output, "accumulation") == "SKIP");
  CHECK(row_of(small.output, "accumulation").find("24 samples hold no full window of 16 x 2") != std::string::npos);
}

TEST_CASE("distributed compares steps before the padded window when train.drop_last = false splits an odd epoch") {
  // 73 samples at 16: 5 batches, the last of 9; 2 ranks x 8 pad it to 10 with the epoch's first
  // sample again, so step 5 trained one sample more on 2 ranks (a false FAIL at 0.078 before).
  const std::string sets = kFixture + "--checks distributed --set train.drop_last=false ";
  const auto run = verify("verify_distributed_padded", sets + "--steps 5 --set data.train.size=73");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitOk);
  CHECK(result_of(run.output, "distributed") == "PASS");
  CHECK(row_of(run.output, "distributed")
            .find("4 steps of plain SGD, 2 ranks x 8 against 1 x 16 (not --steps 5: with train.drop_last = false 2 "
                  "ranks pad the 73 training samples") != std::string::npos);
  // An even split pads nothing: all --steps, across the epoch's end (74 samples hold 5 batches).
  const auto even = verify("verify_distributed_even", sets + "--steps 6 --set data.train.size=74");
  INFO(even.output);
  CHECK(result_of(even.output, "distributed") == "PASS");
  CHECK(row_of(even.output, "distributed").find("6 steps of plain SGD, 2 ranks x 8 against 1 x 16:") != std::string::npos);
  // 9 samples: the only window is the padded one.
  const auto small = verify("verify_distributed_no_window", sets + "--set data.train.size=9");
  INFO(small.output);
  CHECK(small.exit_code == tp::kExitOk);
  CHECK(result_of(small.output, "distributed") == "SKIP");
  CHECK(row_of(small.output, "distributed").find("training split's 9 samples are odd") != std::string::npos);
}

TEST_CASE("overfit judges a loss less the terms it declares floored (plugin ABI 1.9)") {
  // floored_loss = cross entropy + a term sitting at its floor, ln 2 per item, from the start.
  const std::string loss = kFixture + "--steps 2 --checks overfit --set 'loss.component=\"org.torchhost.test.floored_loss\"'";
  const auto declared = verify("verify_floored", loss);
  INFO(declared.output);
  CHECK(declared.exit_code == tp::kExitOk);
  CHECK(result_of(declared.output, "overfit") == "PASS");
  CHECK(row_of(declared.output, "overfit").find("the training loss less its floored terms fell") != std::string::npos);
  CHECK(row_of(declared.output, "overfit").find("'mean_logit_bce' has a floor") != std::string::npos);
  // Undeclared, the same correct loss cannot pass: its floor is above 5% of its start.
  const auto undeclared = verify("verify_floored_undeclared", loss + " --set 'loss.defect=\"undeclared\"'");
  INFO(undeclared.output);
  CHECK(undeclared.exit_code == tp::kExitVerifyFailed);
  CHECK(row_of(undeclared.output, "overfit").find("the training loss went from") != std::string::npos);
  // Declared, a loss whose judged term does not train still fails.
  const auto broken = verify("verify_floored_detached", loss + " --set 'loss.defect=\"detached\"'");
  INFO(broken.output);
  CHECK(broken.exit_code == tp::kExitVerifyFailed);
  CHECK(row_of(broken.output, "overfit").find("the training loss less its floored terms went from") != std::string::npos);
}

TEST_CASE("boxes given as x, y, w, h break the loss's field contract: found by verify, plugins check and training") {
  const std::string run = "--set 'loss.component=\"org.torchhost.test.floored_loss\"' --set loss.contracts=true ";
  const std::string xywh = run + "--set 'data.train.boxes=\"xywh\"'";
  const auto clean = verify("verify_contracts_clean", kFixture + "--checks data " + run + "--set 'data.train.boxes=\"xyxy\"'");
  INFO(clean.output);
  CHECK(clean.exit_code == tp::kExitOk);
  CHECK(row_of(clean.output, "data").find("keeping the loss's field contracts") != std::string::npos);

  const auto verified = verify("verify_contracts_xywh", kFixture + "--checks data " + xywh);
  INFO(verified.output);
  CHECK(verified.exit_code == tp::kExitVerifyFailed);
  const std::string row = row_of(verified.output, "data");
  CHECK(row.find("target field 'boxes': org.torchhost.test.floored_loss takes boxes as (x1, y1, x2, y2)") !=
        std::string::npos);
  CHECK(row.find("Did you give x, y, w, h?") != std::string::npos);

  // `plugins check --config`: the dataset's library alone, the loss found on the search path.
  const auto checked = tp::test::run_host("plugins check " + kFixture + xywh + " '" +
                                          std::string(tp::test::fixture_plugin_dir()) + "/verify_data.so'");
  INFO(checked.output);
  CHECK(checked.exit_code == tp::kExitRuntime);
  CHECK(checked.output.find("[FAIL] org.torchhost.test.verify_data: split 'train', held to the run's loss's field "
                            "contracts:") != std::string::npos);
  CHECK(checked.output.find("(first: train sample 0, box 0 = [") != std::string::npos);

  // Training refuses the first batch before any step, naming its samples; nothing is trained.
  const auto dir = tp::test::fresh_dir("train_contracts_xywh");
  const auto trained = tp::test::run_host("train " + kFixture + xywh + " --output-dir '" + dir.string() + "'");
  INFO(trained.output);
  CHECK(trained.exit_code == tp::kExitConfig);
  CHECK(trained.output.find("(first: the first training batch, sample ") != std::string::npos);
  CHECK(trained.output.find("Nothing was trained.") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "checkpoints" / "last.pt"));
}

TEST_CASE("an unknown --checks name is a usage error before anything loads") {
  const auto run = tp::test::run_host("verify --config configs/quickstart.toml --checks data,gradient");
  INFO(run.output);
  CHECK(run.exit_code == tp::kExitConfig);
  CHECK(run.output.find("unknown check 'gradient'") != std::string::npos);
  CHECK(run.output.find("gradients") != std::string::npos);
}
