// Losses with named terms (tp_loss_v1_t::terms, ABI 1.3): configs/multi_output.toml's weighted_sum
// reports `logits` (cross_entropy) and `bbox` (5 x smooth_l1); the history records
// train/loss/<term> and val/loss/<term> normalised exactly like the total, so they add up to it.
#include <cmath>
#include <string>

#include "integration/history_reader.h"
#include "integration/host_runner.h"

#include <doctest/doctest.h>

TEST_CASE("weighted_sum's terms are recorded as train/loss/<term> and val/loss/<term> and add up to the loss") {
  const auto dir = tp::test::fresh_dir("loss_terms");
  const auto run = tp::test::run_host("--config configs/multi_output.toml --output-dir '" + dir.string() +
                                      "' --set train.epochs=1 --set data.train.size=320 --set data.train.val_size=64 "
                                      "--set train.batch_size=16 --set train.log_every_steps=4 --set train.grad_accum_steps=2 "
                                      "--set progress.mode=\"off\" --set plots.enabled=false");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const auto rows = tp::test::read_history(dir);
  int checked = 0;
  for (const auto& row : rows) {
    for (const std::string split : {"train", "val"}) {
      if (!row.has(split + "/loss")) continue;
      INFO(row.kind, " ", split);
      REQUIRE(row.has(split + "/loss/logits"));
      REQUIRE(row.has(split + "/loss/bbox"));
      const double total = row.values.at(split + "/loss");
      const double sum = row.values.at(split + "/loss/logits") + row.values.at(split + "/loss/bbox");
      CHECK(std::abs(sum - total) <= 1e-6 * std::abs(total));
      CHECK(row.values.at(split + "/loss/bbox") > 0);
      ++checked;
    }
  }
  CHECK(checked == 2 + 2); // the epoch row (train and val) and 2 logging steps (10 optimizer steps / 4)
}
