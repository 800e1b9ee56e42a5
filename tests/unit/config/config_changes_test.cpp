// config_changes (config_changes.h): the per-key differences a resume warns about.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tp/framework/config/config_changes.h"

TEST_CASE("config_changes: changed, new and removed keys by their dotted path, in key order") {
  const std::string before = "[train]\nbatch_size = 16\nepochs = 3\n[data.train]\nroot = '/d'\nmean = [0.5, 0.5]\n"
                             "[eval]\nbatch_size = 32\n";
  const std::string now = "[train]\nbatch_size = 8\nepochs = 3\nmax_steps = 100\n[data.train]\nroot = '/d'\n"
                          "mean = [0.4, 0.5]\n[eval]\nbatch_size = 32\n";
  const std::vector<std::string> expected = {"data.train.mean: [0.5, 0.5] -> [0.4, 0.5]",
                                             "train.batch_size: 16 -> 8", "train.max_steps: 100 (new)"};
  CHECK(tp::config_changes(before, now) == expected);
  CHECK(tp::config_changes(now, before) == std::vector<std::string>{"data.train.mean: [0.4, 0.5] -> [0.5, 0.5]",
                                                                    "train.batch_size: 8 -> 16",
                                                                    "train.max_steps: removed (was 100)"});
  CHECK(tp::config_changes(before, before).empty());
  // Key order, not table order: the same values written in another order are no change.
  CHECK(tp::config_changes("[a]\nx = 1\ny = 2\n", "[a]\ny = 2\nx = 1\n").empty());
  CHECK(tp::config_changes("[a\n", now).front().find("could not be compared") != std::string::npos);
  // Arrays of tables by element; a URI's password never printed (an old checkpoint's config).
  CHECK(tp::config_changes("[[metrics]]\ncomponent = 'a'\n[[metrics]]\ncomponent = 'b'\n",
                           "[[metrics]]\ncomponent = 'a'\n[[metrics]]\ncomponent = 'c'\n") ==
        std::vector<std::string>{"metrics[1].component: \"b\" -> \"c\""});
  const std::vector<std::string> uri = tp::config_changes("[logging.mlflow]\ntracking_uri = 'http://me:secret@h:5000'\n",
                                                          "[logging.mlflow]\ntracking_uri = 'http://h:5000'\n");
  REQUIRE(uri.size() == 1);
  CHECK(uri[0].find("secret") == std::string::npos);
}

TEST_CASE("changes_a_resume_ignores: the optimizer's and the schedule's settings, changed on both sides") {
  const std::string before = "[optim]\nlr = 0.003\nweight_decay = 0.01\nimplementation = 'auto'\n"
                             "[schedule]\nname = 'constant'\n[train]\nepochs = 3\n";
  const std::string now = "[optim]\nlr = 0.01\nweight_decay = 0.01\nimplementation = 'loop'\nlayer_decay = 0.5\n"
                          "[schedule]\nname = 'cosine'\n[train]\nepochs = 4\n";
  // Not train.epochs (the schedule's own check), not optim.implementation (kernels for the same
  // state), not a key only the new side has (a setting added since the checkpoint).
  CHECK(tp::changes_a_resume_ignores(before, now) ==
        std::vector<std::string>{"optim.lr: 0.003 -> 0.01", "schedule.name: \"constant\" -> \"cosine\""});
  CHECK(tp::changes_a_resume_ignores(before, before).empty());
  CHECK(tp::changes_a_resume_ignores("[[optim.param_groups]]\nparams = 'fc.*'\nlr = 0.1\n",
                                     "[[optim.param_groups]]\nparams = 'fc.*'\nlr = 0.2\n") ==
        std::vector<std::string>{"optim.param_groups[0].lr: 0.1 -> 0.2"});
}
