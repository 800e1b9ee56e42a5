// ARCH-20: every stateful role reads back what it saved. A trainer trains into the middle of an
// epoch (EMA, SWA averaging, evaluation, early stopping, accumulation all live), its checkpoint is
// written and read back, a second trainer resumes from it, and each role of the second one must
// then save exactly what the first one's saved: a field a role writes but does not restore shows
// up here, named with the role that wrote it.
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"
#include "tp/framework/config/load.h"
#include "tp/framework/engine/trainer.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/plugin/registry.h"

#include "host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

/// A tensor's dtype, shape and bytes, as a short fingerprint (exact: any bit differs, it differs).
std::string fingerprint(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  const at::Tensor c = t.detach().cpu().contiguous();
  const std::string bytes(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  std::ostringstream out;
  out << c.scalar_type() << c.sizes() << "#" << std::hash<std::string>{}(bytes);
  return out.str();
}

template <typename T>
std::string join(const std::vector<T>& values) {
  std::ostringstream out;
  out.precision(17);
  for (const auto& v : values) out << v << ",";
  return out.str();
}

/// Every field of `c` by its checkpoint key (checkpoint.h's format), as comparable text.
std::map<std::string, std::string> fields(const tp::CheckpointContents& c) {
  std::map<std::string, std::string> f;
  f["scheduler"] = join(c.scheduler_state);
  f["scaler"] = std::to_string(c.scaler_scale) + "/" + std::to_string(c.scaler_growth_tracker);
  f["epoch"] = std::to_string(c.epoch);
  f["batch"] = std::to_string(c.batch);
  f["step"] = std::to_string(c.step);
  f["world_size"] = std::to_string(c.world_size);
  f["rng_cpu"] = fingerprint(c.rng_cpu);
  f["rng_cuda"] = fingerprint(c.rng_cuda);
  f["running_loss"] = join(c.running_loss);
  f["early_stopping"] = join(c.early_stopping);
  f["monitor"] = c.monitor;
  f["best"] = std::to_string(c.best);
  f["config"] = c.config_toml;
  f["plugins"] = join(c.plugins);
  f["swa_schedule"] = join(c.swa_schedule);
  f["micro_batch_splits"] = std::to_string(c.micro_batch_splits);
  f["run_id"] = c.run_id;
  f["history_records"] = std::to_string(c.history_records);
  f["eval_pending"] = std::to_string(c.eval_pending);
  std::string model;
  if (c.model_state)
    for (const auto& s : *c.model_state) model += s.name + "=" + fingerprint(s.tensor) + ";";
  f["model"] = model;
  // The optimizer's archive keys its state by tensor address, so it is compared per parameter:
  // each group's lr and each parameter's state, serialised on its own.
  std::string optimizer;
  if (c.optimizer) {
    for (const auto& group : c.optimizer->param_groups()) {
      optimizer += "lr=" + std::to_string(group.options().get_lr()) + ";";
      for (const auto& p : group.params()) {
        const auto it = c.optimizer->state().find(p.unsafeGetTensorImpl());
        if (it == c.optimizer->state().end()) {
          optimizer += "none;";
          continue;
        }
        torch::serialize::OutputArchive archive;
        it->second->serialize(archive);
        std::ostringstream bytes;
        archive.save_to(bytes);
        optimizer += std::to_string(std::hash<std::string>{}(bytes.str())) + ";";
      }
    }
  }
  f["optimizer"] = optimizer;
  std::string groups;
  for (const auto& group : c.optimizer_groups) groups += join(group) + "|";
  f["optimizer_groups"] = groups;
  for (const auto& average : c.averages) {
    std::string weights;
    for (const auto& s : *average.state) weights += s.name + "=" + fingerprint(s.tensor) + ";";
    f[average.name] = weights;
    f[average.name + "_updates"] = std::to_string(average.updates);
  }
  // Left out as not restorable by design: train_seconds (the resumed trainer's clock has run on)
  // and provenance (what made *this* process: its start time; resume compares, never copies it).
  return f;
}

}  // namespace

TEST_CASE("every state role reads back what it saved (ARCH-20)") {
  tp::Logger logger;
  tp::HostServices services(logger, tp::ProcessPlace{});
  tp::Registry registry(services);
  registry.load_search_path({{tp::test::fixture_plugin_dir(), "--plugin-dir"}, {tp::test::plugin_dir(), "built-in"}});
  const auto dir = tp::test::fresh_dir("state_roles");
  // 8 optimizer steps per epoch (64 samples, batches of 4, 2 per window); 19 steps stop inside
  // epoch 3 (max_steps still ends that epoch), after SWA averaged epochs 2 and 3 and three
// evaluations fed early stopping.
  tp::RunConfig config = tp::load_run_config(
      std::filesystem::path(tp::test::source_dir()) / "tests/integration/c_regression.toml",
      {"run.output_dir=\"" + dir.string() + "\"", "progress.mode=\"off\"", "train.epochs=3", "train.max_steps=19",
       "data.train.size=64", "train.batch_size=4", "train.grad_accum_steps=2", "ema.enabled=true",
       "ema.decay=0.9", "swa.enabled=true", "swa.start_epoch=2", "swa.lr=0.01", "swa.update_bn=false",
       "eval.strategy=\"epoch\"", "early_stopping.patience=5", "checkpoint.strategy=\"no\"",
       "checkpoint.save_top_k=0"},
      {});
  tp::resolve_components(config, registry); // the plugins' keys and their defaults, as the host does
  const c10::Device cpu(c10::kCPU);
  tp::RunComponents parts_a = tp::create_components(config, registry);
  tp::Trainer a(config, parts_a, cpu, logger, dir);
  a.set_run_id("0123456789abcdef0123456789abcdef");
  a.fit();
  const tp::ResumePosition where{2, 6};
  const auto file = dir / "roles.pt";
  tp::save_checkpoint(file, a.checkpoint_contents(where));
  const tp::LoadedCheckpoint loaded = tp::load_checkpoint(file);

  tp::RunComponents parts_b = tp::create_components(config, registry);
  tp::Trainer b(config, parts_b, cpu, logger, dir);
  b.resume_from(loaded);

  const auto saved = fields(a.checkpoint_contents(where));
  const auto reread = fields(b.checkpoint_contents(where));
  // The fields each role writes, found by letting it write alone into an empty checkpoint.
  const auto empty = fields(tp::CheckpointContents{});
  std::vector<tp::StateRole> roles = a.state_roles(where);
  REQUIRE(roles.size() == 12);
  std::map<std::string, std::string> owner;
  for (const tp::StateRole& role : roles) {
    tp::CheckpointContents alone;
    role.save(alone);
    for (const auto& [key, value] : fields(alone))
      if (!empty.contains(key) || empty.at(key) != value) owner[key] = role.name;
  }
  // Every key the run's checkpoint holds is written by some role, and the averages are live.
  CHECK(saved.contains("ema"));
  CHECK(saved.contains("swa"));
  CHECK(saved.at("swa_updates") == "2"); // epochs 2 and 3 (cut short by max_steps, still ended)
  CHECK(saved.at("ema_updates") == "19");
  CHECK(saved.at("step") == "19");
  for (const auto& [key, value] : saved) {
    CAPTURE(key);
    // A field still at its default value cannot be told apart from one nobody writes.
    if (empty.contains(key) && empty.at(key) == value) CHECK(reread.at(key) == value);
    else CHECK_MESSAGE(owner.contains(key), "no role writes " << key);
    const std::string role = owner.contains(key) ? owner.at(key) : "?";
    CHECK_MESSAGE(reread.contains(key), "role " << role << " saved " << key << " and the resumed trainer has none");
    if (reread.contains(key)) CHECK_MESSAGE(reread.at(key) == value, "role " << role << " does not read back " << key);
  }
}
