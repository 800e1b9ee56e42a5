// The host's side of schedule_timm_oracle.py: the lr every optimizer step of a run trains with,
// from [schedule] options as the trainer builds them (options_for_groups at optim.lr, the total
// and the epoch length from total_optimizer_steps), optionally resumed from its state mid-run.
// Usage: schedule_driver <lr> <epochs> <batches per epoch> <grad_accum_steps> [key=value ...]
//   keys: name interval warmup_steps warmup_epochs warmup_lr warmup_start_factor warmup_prefix
//         cooldown_epochs min_lr step_size gamma milestones (comma-separated) power total_iters max_steps
//         resume_at (save after that many steps, rebuild, load, go on) lr_scale (a second group
//         at lr × lr_scale, as layer decay makes one)
// Prints one line per optimizer step: each group's lr as an exact hex float.
#include <torch/optim/sgd.h>

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>

#include "tp/framework/error.h"
#include "tp/framework/optim/lr_scheduler.h"

namespace {

struct Run {
  tp::SchedulerOptions options;
  int64_t max_steps = 0, resume_at = -1;
  double lr_scale = 0;
};

void set(Run& run, const std::string& key, const std::string& value) {
  tp::SchedulerOptions& o = run.options;
  if (key == "name") o.name = value;
  else if (key == "interval") o.interval = value;
  else if (key == "warmup_steps") o.warmup_steps = std::stoll(value);
  else if (key == "warmup_epochs") o.warmup_epochs = std::stoll(value);
  else if (key == "warmup_lr") o.warmup_lr = std::stod(value);
  else if (key == "warmup_start_factor") o.warmup_start_factor = std::stod(value);
  else if (key == "warmup_prefix") o.warmup_prefix = value == "true";
  else if (key == "cooldown_epochs") o.cooldown_epochs = std::stoll(value);
  else if (key == "min_lr") o.min_lr = {std::stod(value)};
  else if (key == "step_size") o.step_size = std::stoll(value);
  else if (key == "gamma") o.gamma = std::stod(value);
  else if (key == "power") o.power = std::stod(value);
  else if (key == "total_iters") o.total_iters = std::stoll(value);
  else if (key == "milestones") {
    std::istringstream in(value);
    for (std::string m; std::getline(in, m, ',');) o.milestones.push_back(std::stoll(m));
  } else if (key == "max_steps") run.max_steps = std::stoll(value);
  else if (key == "resume_at") run.resume_at = std::stoll(value);
  else if (key == "lr_scale") run.lr_scale = std::stod(value);
  else throw tp::Error("schedule_driver: unknown key " + key);
}

std::unique_ptr<torch::optim::SGD> make_optimizer(double lr, double lr_scale) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{at::zeros({1}).requires_grad_()},
                      std::make_unique<torch::optim::SGDOptions>(lr));
  if (lr_scale > 0)
    groups.emplace_back(std::vector<at::Tensor>{at::zeros({1}).requires_grad_()},
                        std::make_unique<torch::optim::SGDOptions>(lr * lr_scale));
  return std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(lr));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: schedule_driver <lr> <epochs> <batches> <grad_accum_steps> [key=value ...]\n");
    return 2;
  }
  try {
    const double lr = std::stod(argv[1]);
    Run run;
    for (int i = 5; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto eq = arg.find('=');
      set(run, arg.substr(0, eq), arg.substr(eq + 1));
    }
    // As Trainer::init_schedule computes them.
    const int64_t per_epoch = tp::total_optimizer_steps(1, std::stoll(argv[3]), std::stoll(argv[4]));
    int64_t total = tp::total_optimizer_steps(std::stoll(argv[2]), std::stoll(argv[3]), std::stoll(argv[4]));
    if (run.max_steps > 0 && run.max_steps < total) total = run.max_steps;
    auto optimizer = make_optimizer(lr, run.lr_scale);
    const tp::SchedulerOptions options = tp::options_for_groups(run.options, *optimizer, lr);
    auto schedule = tp::make_scheduler(options, *optimizer, total, per_epoch);
    for (int64_t k = 0; k < total; ++k) {
      if (k == run.resume_at) {
        const std::vector<double> state = schedule->state();
        optimizer = make_optimizer(lr, run.lr_scale);
        schedule = tp::make_scheduler(options, *optimizer, total, per_epoch);
        schedule->load_state(state);
      }
      for (double group_lr : schedule->lrs()) std::printf("%a ", group_lr);  // the lr step k trains with
      std::printf("\n");
      schedule->step();
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "schedule_driver: %s\n", e.what());
    return 1;
  }
}
