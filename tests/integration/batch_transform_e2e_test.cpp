// `host` with [[data.batch_transforms]] (mixup_cutmix): training runs and learns on mixed
// batches, validation reports accuracy on untransformed batches, the transforms change training
// (prob = 0 trains differently), and SIGTERM + --resume auto ends bitwise equal to a straight run
// (the transform seeds depend only on the batch's position).
#include <ATen/ATen.h>

#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "history_reader.h"
#include "host_runner.h"

#include <doctest/doctest.h>

namespace {

const std::string kBatchTransformE2eArgs = "--config tests/integration/batch_transforms.toml --set progress.mode=\"off\" "
                          "--set run.threads=1 ";

bool same_weights(const std::filesystem::path& a_dir, const std::filesystem::path& b_dir) {
  const auto a = tp::load_checkpoint(a_dir / "checkpoints" / "last.pt");
  const auto b = tp::load_checkpoint(b_dir / "checkpoints" / "last.pt");
  if (a.step != b.step || a.model.size() != b.model.size()) return false;
  for (std::size_t i = 0; i < a.model.size(); ++i)
    if (!at::equal(a.model[i].second, b.model[i].second)) return false;
  return true;
}

}  // namespace

TEST_CASE("mixup_cutmix trains small_cnn; val accuracy is reported; resume is bitwise exact") {
  const auto straight_dir = tp::test::fresh_dir("bxform_straight");
  const auto straight = tp::test::run_host(kBatchTransformE2eArgs + "--output-dir '" + straight_dir.string() + "'");
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  double accuracy = -1.0;
  for (const auto& row : tp::test::read_history(straight_dir))
    if (row.values.contains("val/accuracy")) accuracy = row.values.at("val/accuracy");
  CHECK(accuracy > 0.5);  // 3 classes: chance is 1/3

  // prob = 0: the same labels as probabilities but no mixing; the weights must differ.
  const auto unmixed_dir = tp::test::fresh_dir("bxform_unmixed");
  const auto unmixed = tp::test::run_host(kBatchTransformE2eArgs + "--set data.batch_transforms[0].prob=0.0 --output-dir '" +
                                          unmixed_dir.string() + "'");
  REQUIRE(unmixed.exit_code == 0);
  CHECK_FALSE(same_weights(straight_dir, unmixed_dir));

  // SIGTERM after a few logged steps, then --resume auto.
  const auto dir = tp::test::fresh_dir("bxform_interrupted");
  const auto interrupted =
      tp::test::run_host_until_history(kBatchTransformE2eArgs + "--output-dir '" + dir.string() + "'", dir / "history.jsonl", 3);
  INFO(interrupted.output);
  CHECK(interrupted.output.find("exit=143") != std::string::npos);
  const auto resumed = tp::test::run_host(kBatchTransformE2eArgs + "--output-dir '" + dir.string() + "' --resume auto");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(same_weights(straight_dir, dir));
}
