// load_run_config errors: each names the file, line:column, the key path, what was expected and
// what to do.
#include <string>

#include "tp/framework/config/load.h"

#include "unit/config/config_test_util.h"

namespace {

using tp::test::expect_config_error;
using tp::test::kRequiredComponents;
using tp::test::load_text;

/// The error of loading `text` (components appended).
tp::ConfigError error_of(const std::string& text) {
  return expect_config_error([&] { load_text(text + kRequiredComponents); });
}

TEST_CASE("unknown host key: position and did-you-mean within its table") {
  const tp::ConfigError e = error_of("[train]\nepochs = 3\nbatch_sz = 8\n");
  CHECK(e.key_path() == "train.batch_sz");
  const std::string message = e.what();
  TP_CHECK_CONTAINS(message, "run.toml:3:12");
  TP_CHECK_CONTAINS(message, "unknown key 'train.batch_sz'");
  TP_CHECK_CONTAINS(message, "did you mean 'train.batch_size'?");
  TP_CHECK_CONTAINS(message, "[train] accepts: epochs, batch_size, log_every_steps, drop_last");
}

TEST_CASE("unknown table and misplaced key get suggestions over all paths") {
  const tp::ConfigError table = error_of("\n[trian]\nepochs = 3\n");
  CHECK(table.key_path() == "trian");
  TP_CHECK_CONTAINS(std::string(table.what()), "run.toml:2:1");
  TP_CHECK_CONTAINS(std::string(table.what()), "did you mean 'train'?");

  const tp::ConfigError misplaced = error_of("batch_size = 3\n");
  CHECK(misplaced.key_path() == "batch_size");
  TP_CHECK_CONTAINS(std::string(misplaced.what()), "did you mean 'train.batch_size'?");

  const tp::ConfigError in_data = error_of("[data]\nnum_worker = 3\n");
  CHECK(in_data.key_path() == "data.num_worker");
  TP_CHECK_CONTAINS(std::string(in_data.what()), "did you mean 'data.num_workers'?");
}

// A fine-tuning trial wrote optim.learning_rate and got no suggestion: 11 edits from "lr".
TEST_CASE("another trainer's name for a host key gets ours: learning_rate, max_epochs, gradient_clip_val") {
  TP_CHECK_CONTAINS(std::string(error_of("[optim]\nlearning_rate = 0.1\n").what()), "did you mean 'optim.lr'?");
  TP_CHECK_CONTAINS(std::string(error_of("[train]\nmax_epochs = 3\n").what()), "did you mean 'train.epochs'?");
  TP_CHECK_CONTAINS(std::string(error_of("[trainer]\ngradient_clip_val = 1.0\n").what()), "did you mean");
  TP_CHECK_CONTAINS(std::string(error_of("gradient_clip_val = 1.0\n").what()), "did you mean 'train.max_grad_norm'?");
}

TEST_CASE("wrong type: expected vs got, with position") {
  const tp::ConfigError quoted = error_of("[train]\nbatch_size = \"64\"\n");
  CHECK(quoted.key_path() == "train.batch_size");
  TP_CHECK_CONTAINS(std::string(quoted.what()), "run.toml:2:14");
  TP_CHECK_CONTAINS(std::string(quoted.what()), "expected an integer, got a string (\"64\")");
  TP_CHECK_CONTAINS(std::string(quoted.what()), "batch_size = 32");

  const tp::ConfigError float_for_int = error_of("[train]\nepochs = 3.0\n");
  CHECK(float_for_int.key_path() == "train.epochs");
  TP_CHECK_CONTAINS(std::string(float_for_int.what()), "expected an integer, got a float");

  const tp::ConfigError int_for_bool = error_of("[data]\n\nshuffle = 1\n");
  CHECK(int_for_bool.key_path() == "data.shuffle");
  TP_CHECK_CONTAINS(std::string(int_for_bool.what()), "run.toml:3:11");
  TP_CHECK_CONTAINS(std::string(int_for_bool.what()), "expected a boolean, got an integer (1)");

  const tp::ConfigError array = error_of("[optim]\nbetas = [0.9, \"x\"]\n");
  CHECK(array.key_path() == "optim.betas");
  TP_CHECK_CONTAINS(std::string(array.what()),
                    "expected an array of floats, got an array of mixed types");

  const tp::ConfigError section = error_of("train = 5\n");
  CHECK(section.key_path() == "train");
  TP_CHECK_CONTAINS(std::string(section.what()), "expected a table");
}

TEST_CASE("a string outside the choices lists them") {
  const tp::ConfigError optim = error_of("[optim]\nname = \"adagrad\"\n");
  CHECK(optim.key_path() == "optim.name");
  TP_CHECK_CONTAINS(std::string(optim.what()), "run.toml:2:8");
  TP_CHECK_CONTAINS(std::string(optim.what()), "expected sgd, adam, adamw, rmsprop, lamb, lion or lars");

  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:1a", "CPU"}) {
    CAPTURE(bad);
    const tp::ConfigError device =
        error_of(std::string("[run]\ndevice = \"") + bad + "\"\n");
    CHECK(device.key_path() == "run.device");
    TP_CHECK_CONTAINS(std::string(device.what()), "expected auto, cpu, cuda or cuda:N");
  }
  for (const char* good : {"auto", "cpu", "cuda", "cuda:0", "cuda:12"}) {
    CAPTURE(good);
    CHECK(load_text(std::string("[run]\ndevice = \"") + good + "\"\n" + kRequiredComponents)
              .run.device == good);
  }
  // An enumerated choice (choices.h) is refused with its enum's words, and parsed into the enum.
  const tp::ConfigError graphs = error_of("[run]\ncuda_graphs = \"yes\"\n");
  CHECK(graphs.key_path() == "run.cuda_graphs");
  TP_CHECK_CONTAINS(std::string(graphs.what()), "expected off, on or auto");
  const tp::ConfigError policy = error_of("[train]\nnan_policy = \"Skip\"\n");
  TP_CHECK_CONTAINS(std::string(policy.what()), "expected stop or skip");
  const tp::RunConfig parsed = load_text(std::string("[train]\nnan_policy = \"skip\"\non_oom = \"split\"\n[run]\n"
                                                     "cuda_graphs = \"auto\"\n[eval]\nstrategy = \"steps\"\n") +
                                         kRequiredComponents);
  CHECK(parsed.train.nan_policy == tp::NanPolicy::kSkip);
  CHECK(parsed.train.on_oom == tp::OomPolicy::kSplit);
  CHECK(parsed.run.cuda_graphs == tp::CudaGraphMode::kAuto);
  CHECK(parsed.eval.strategy == tp::IntervalStrategy::kSteps);
  CHECK(tp::to_string(parsed.eval.strategy) == "steps");
  CHECK(tp::choice_words<tp::BatchNormSync>() == std::vector<std::string>{"broadcast", "reduce"});
  const tp::ConfigError mode = error_of("[checkpoint]\nmode = \"best\"\n");
  TP_CHECK_CONTAINS(std::string(mode.what()), "expected auto, min or max");
  const tp::ConfigError progress = error_of("[progress]\nmode = \"tqdm\"\n");
  TP_CHECK_CONTAINS(std::string(progress.what()), "expected auto, bar, lines or off");
}

TEST_CASE("missing required tables and component ids are named") {
  const tp::ConfigError model = expect_config_error([] {
    load_text("[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n");
  });
  CHECK(model.key_path() == "model");
  TP_CHECK_CONTAINS(std::string(model.what()), "run.toml: missing required table [model]");
  TP_CHECK_CONTAINS(std::string(model.what()), "component = \"org.torchhost.small_cnn\"");

  const tp::ConfigError train = expect_config_error(
      [] { load_text("[model]\ncomponent = \"m\"\n[loss]\ncomponent = \"l\"\n"); });
  CHECK(train.key_path() == "data.train");

  const tp::ConfigError id = expect_config_error([] {
    load_text("[model]\nwidth = 3\n[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n");
  });
  CHECK(id.key_path() == "model.component");
  TP_CHECK_CONTAINS(std::string(id.what()), "missing required key 'model.component'");

  const tp::ConfigError metric =
      error_of("[[metrics]]\ncomponent = \"a\"\n[[metrics]]\ntop_k = 1\n");
  CHECK(metric.key_path() == "metrics[1].component");

  const tp::ConfigError empty_id = error_of("[[callbacks]]\ncomponent = \"\"\n");
  CHECK(empty_id.key_path() == "callbacks[0].component");
  TP_CHECK_CONTAINS(std::string(empty_id.what()), "run.toml:2:13");

  const tp::ConfigError not_array = error_of("[metrics]\ncomponent = \"a\"\n");
  CHECK(not_array.key_path() == "metrics");
  TP_CHECK_CONTAINS(std::string(not_array.what()), "expected an array of tables");
}

TEST_CASE("a data-only config (ConfigScope::kData, host shards write) needs [data.train] alone") {
  // Issue 58, item 15: `host shards write` demanded [model] and [loss], one error at a time.
  const std::string data = "[data.train]\ncomponent = \"d\"\nroot = \"x\"\n";
  const tp::RunConfig config = tp::load_run_config_from_string(data, "run.toml", {}, {}, tp::ConfigScope::kData);
  CHECK(config.data.train.component == "d");
  CHECK(config.model.component.empty());
  CHECK(config.loss.component.empty());
  CHECK(config.model.key_path == "model");
  // A run still needs both; a data-only load still checks them when given, and needs [data.train].
  CHECK(expect_config_error([&] { load_text(data); }).key_path() == "model");
  CHECK(expect_config_error([&] {
          tp::load_run_config_from_string(data + "[model]\nwidth = 3\n", "run.toml", {}, {}, tp::ConfigScope::kData);
        }).key_path() == "model.component");
  CHECK(expect_config_error([] {
          tp::load_run_config_from_string("[run]\nseed = 1\n", "run.toml", {}, {}, tp::ConfigScope::kData);
        }).key_path() == "data.train");
}

TEST_CASE("TOML syntax error: file:line:column and TOML++'s description") {
  const tp::ConfigError e = expect_config_error([] { load_text("[train]\nepochs = = 3\n"); });
  CHECK(e.key_path().empty());
  TP_CHECK_CONTAINS(std::string(e.what()), "run.toml:2:");
  TP_CHECK_CONTAINS(std::string(e.what()), "TOML syntax error: ");
}

TEST_CASE("missing file names the path") {
  const tp::ConfigError e = expect_config_error(
      [] { tp::load_run_config("/nonexistent/tp/run.toml", {}, {}); });
  CHECK(e.key_path().empty());
  TP_CHECK_CONTAINS(std::string(e.what()), "'/nonexistent/tp/run.toml' does not exist");
}

TEST_CASE("semantic limits") {
  struct Case {
    const char* text;
    const char* key;
    const char* expect;
  };
  const Case cases[] = {
      {"[train]\nepochs = 0\n", "train.epochs", "run.toml:2:10: train.epochs: must be >= 1"},
      {"[train]\nbatch_size = -4\n", "train.batch_size", "must be >= 1, got an integer (-4)"},
      {"[optim]\nlr = 0.0\n", "optim.lr", "run.toml:2:6: optim.lr: must be > 0"},
      {"[optim]\nlr = -1\n", "optim.lr", "must be > 0"},
      {"[optim]\nlr = nan\n", "optim.lr", "must be > 0"},
      {"[optim]\nbetas = [0.9]\n", "optim.betas", "expected two values in [0, 1)"},
      {"[optim]\nbetas = [0.9, 1.0]\n", "optim.betas", "out of range"},
      {"[optim]\nbetas = [-0.1, 0.9]\n", "optim.betas", "out of range"},
      // Adaptive clipping is timm's third --clip-mode: one clip mode per run.
      {"[train]\nagc_clip_factor = 0.01\nmax_grad_norm = 1.0\n", "train.agc_clip_factor",
       "run.toml:2:19: train.agc_clip_factor = 0.01 (adaptive gradient clipping, timm's --clip-mode agc) and "
       "train.max_grad_norm = 1 are two clip modes"},
      {"[train]\nagc_clip_factor = 0.01\nclip_value = 0.5\n", "train.agc_clip_factor", "set train.clip_value = 0"},
      {"[data]\nnum_workers = -1\n", "data.num_workers", "must be >= 0"},
      // A typo's count of threads: host predict crashed creating them (SIGSEGV), training ran out of memory.
      {"[run]\nthreads = 100000\n", "run.threads", "run.threads: must be >= 0 and < 1024, got an integer (100000)"},
      {"[data]\nprefetch = 0\n", "data.prefetch", "must be >= 1"},
      {"[optim]\nmomentum = 1.0\n", "optim.momentum", "must be >= 0 and < 1"},
      {"[progress]\nevery_seconds = 0\n", "progress.every_seconds", "must be > 0"},
      // Keys with an open range took NaN before (issue 41): a decay factor, a norm's order.
      {"[schedule]\ngamma = nan\n", "schedule.gamma", "run.toml:2:9: schedule.gamma: got nan, which is not a number"},
      {"[train]\ngrad_norm_type = nan\n", "train.grad_norm_type", "train.grad_norm_type: got nan"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const tp::ConfigError e = error_of(c.text);
    CHECK(e.key_path() == c.key);
    TP_CHECK_CONTAINS(std::string(e.what()), c.expect);
  }
}

}  // namespace

TEST_CASE("[[optim.param_groups]] and model.activation_checkpointing are host keys") {
  const tp::RunConfig cfg = load_text(kRequiredComponents +
                                      "[[optim.param_groups]]\npattern = \"head.*\"\nlr = 0.5\n"
                                      "[[optim.param_groups]]\npattern = \"*.bias\"\nweight_decay = 0\n");
  REQUIRE(cfg.optim.param_groups.size() == 2);
  CHECK(cfg.optim.param_groups[0].pattern == "head.*");
  CHECK(cfg.optim.param_groups[0].lr == 0.5);
  CHECK_FALSE(cfg.optim.param_groups[0].weight_decay.has_value());
  CHECK(cfg.optim.param_groups[1].weight_decay == 0.0);

  const tp::ConfigError missing =
      error_of("[[optim.param_groups]]\nlr = 0.5\n");
  CHECK(missing.key_path() == "optim.param_groups[0].pattern");
  const tp::ConfigError unknown =
      error_of("[[optim.param_groups]]\npattern = \"a\"\nmomentum = 0.5\n");
  TP_CHECK_CONTAINS(std::string(unknown.what()), "accepts pattern, lr, weight_decay, freeze, unfreeze_at_epoch and freeze_bn_stats");
  const tp::ConfigError negative =
      error_of("[[optim.param_groups]]\npattern = \"a\"\nlr = -1\n");
  CHECK(negative.key_path() == "optim.param_groups[0].lr");

  const tp::RunConfig checkpointed = load_text(
      "[model]\ncomponent = \"m\"\nactivation_checkpointing = true\nwidth = 3\n"
      "[loss]\ncomponent = \"l\"\n[data.train]\ncomponent = \"d\"\n");
  CHECK(checkpointed.activation_checkpointing);
  CHECK_FALSE(checkpointed.model.options.contains("activation_checkpointing"));
  CHECK(checkpointed.model.options.contains("width"));
  const tp::ConfigError wrong = expect_config_error([] {
    load_text("[model]\ncomponent = \"m\"\nactivation_checkpointing = 1\n[loss]\ncomponent = \"l\"\n"
              "[data.train]\ncomponent = \"d\"\n");
  });
  CHECK(wrong.key_path() == "model.activation_checkpointing");
}

// Security trial F4: "http://alice:pa#ss1@host" was accepted and written in clear to config.toml,
// runtime.toml, checkpoints and train.log; now refused at load, before anything is written, from
// every place a tracking URI comes from, with the password nowhere in the message.
TEST_CASE("a tracking URI whose user-info reads more than one way is refused at load, redacted") {
  const std::string uri = "\"http://alice:pa#ss1@127.0.0.1:5000\"";
  const tp::ConfigError in_file = error_of("[logging.mlflow]\ntracking_uri = " + uri + "\n");
  const tp::ConfigError by_set = expect_config_error(
      [&] { load_text(kRequiredComponents, {"logging.mlflow.tracking_uri=" + uri}); });
  const tp::ConfigError by_mirror = expect_config_error([&] {
    load_text(kRequiredComponents, {}, {{"TP_LOGGING_MLFLOW_TRACKING_URI", "http://bob:en#v5@127.0.0.1:5000"}});
  });
  const tp::ConfigError scheme_less = expect_config_error(
      [&] { load_text(kRequiredComponents, {"logging.mlflow.tracking_uri=\"alice:passw4@127.0.0.1:5000\""}); });
  for (const tp::ConfigError& e : {in_file, by_set, by_mirror, scheme_less}) {
    const std::string message = e.what();
    CHECK(e.key_path() == "logging.mlflow.tracking_uri");
    CHECK(message.find("pa#ss1") == std::string::npos);
    CHECK(message.find("en#v5") == std::string::npos);
    CHECK(message.find("passw4") == std::string::npos);
    TP_CHECK_CONTAINS(message, "***@127.0.0.1:5000");
    TP_CHECK_CONTAINS(message, "'#' as %23");
  }
  TP_CHECK_CONTAINS(std::string(in_file.what()), "run.toml:2:16: logging.mlflow.tracking_uri = \"http://***@");
  TP_CHECK_CONTAINS(std::string(by_set.what()), "--set logging.mlflow.tracking_uri = \"http://***@");
  TP_CHECK_CONTAINS(std::string(by_mirror.what()), "TP_LOGGING_MLFLOW_TRACKING_URI = \"http://***@");

  // MLFLOW_TRACKING_URI stands for an empty key while MLflow is on.
  const tp::ConfigError by_mlflow_env = expect_config_error([&] {
    load_text("[logging.mlflow]\nenabled = true\n" + kRequiredComponents, {},
              {{"MLFLOW_TRACKING_URI", "http://carol:pa/ss3@127.0.0.1:5000"}});
  });
  CHECK(by_mlflow_env.key_path() == "MLFLOW_TRACKING_URI");
  CHECK(std::string(by_mlflow_env.what()).find("pa/ss3") == std::string::npos);
  // Encoded, the same password loads.
  CHECK(load_text(kRequiredComponents, {"logging.mlflow.tracking_uri=\"http://alice:pa%23ss1@h:5000\""})
            .logging.mlflow.tracking_uri == "http://alice:pa%23ss1@h:5000");
}

// Security trial F15, items 3 and 4: data.num_workers = 100000 passed the config and stopped the
// DataLoader (exit 1, no key named); train.batch_size = 2^62 was refused as "must be >= 1", which
// it is: the limit check read an integer past 2^53 as 0.
TEST_CASE("data.num_workers past the loader's 1024 and an integer past 2^53 are refused naming the real bound") {
  const tp::ConfigError workers =
      expect_config_error([&] { load_text(kRequiredComponents, {"data.num_workers=100000"}); });
  CHECK(workers.key_path() == "data.num_workers");
  TP_CHECK_CONTAINS(std::string(workers.what()),
                    "--set data.num_workers=100000: data.num_workers: must be >= 0 and < 1025, got an integer (100000)");
  CHECK(load_text(kRequiredComponents, {"data.num_workers=1024"}).data.num_workers == 1024);

  const tp::ConfigError batch =
      expect_config_error([&] { load_text(kRequiredComponents, {"train.batch_size=4611686018427387904"}); });
  CHECK(batch.key_path() == "train.batch_size");
  TP_CHECK_CONTAINS(std::string(batch.what()),
                    "train.batch_size: must be >= 1 and at most 2^53 = 9007199254740992, the largest integer a host "
                    "key takes, got an integer (4611686018427387904)");
  CHECK(load_text(kRequiredComponents, {"train.batch_size=9007199254740992"}).train.batch_size == 9007199254740992);
}
