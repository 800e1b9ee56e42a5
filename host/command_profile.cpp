// `host profile`: builds the configured model, feeds it one batch (the model's declared example
// inputs, or the training split's first samples when it declares none or they do not fit this
// configuration) and reports size, FLOPs/MACs and inference latency per device and precision.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstdio>
#include <optional>

#include "commands.h"
#include "session.h"
#include "training_batch.h"
#include "tp/framework/config/value_kinds.h"
#include "tp/framework/config/write.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/model_inputs.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/profile/model_profile.h"
#include "tp/framework/profile/profile_report.h"
#include "tp/framework/util/atomic_file.h"

namespace tp::cli {

int run_profile(const Options& options) {
  auto session = open_session(options);
  const RunConfig& config = session->config;

  ProfileOptions profile_options;
  profile_options.devices.clear();
  // run.device was checked when the config was loaded; --devices entries get the same check here,
  // the message naming the option. A device the user set as run.device must exist (resolve_device
  // refuses, exit 2); one of several --devices that this host lacks ("cuda" on a CPU-only host)
  // gets a not-run row with the reason and the others still run (docs/profiling.md).
  const bool from_option = !options.devices.empty();
  for (const auto& spec : split_list(from_option ? options.devices : config.run.device)) {
    parse_device(spec, from_option ? "--devices" : "run.device");
    if (from_option)
      if (std::string why = device_unavailable_reason(spec); !why.empty()) {
        session->logger.warn("host profile: --devices " + spec + " does not run here: " + why);
        profile_options.unavailable.emplace_back(spec, std::move(why));
        continue;
      }
    profile_options.devices.push_back(resolve_device(spec));
  }
  if (profile_options.devices.empty() && !profile_options.unavailable.empty()) {
    std::string reasons;
    for (const auto& [spec, why] : profile_options.unavailable) reasons += (reasons.empty() ? "" : "; ") + spec + ": " + why;
    throw ConfigError("--devices", "host profile: none of --devices " + options.devices + " can run on this host (" +
                                       reasons + "). Add one that can, e.g. --devices cpu," + options.devices + ".");
  }
  profile_options.precisions.clear();
  for (const auto& name : split_list(options.precisions)) {
    const std::optional<Precision> precision = try_parse_precision(name);
    if (!precision)
      throw ConfigError("--precisions", "host profile " + value_kind_message(precision_kind(), "--precisions", name) +
                                            " A comma-separated list: --precisions fp32,bf16.");
    profile_options.precisions.push_back(*precision);
  }
  if (profile_options.devices.empty() || profile_options.precisions.empty())
    throw ConfigError("", "host profile: --devices and --precisions need at least one entry each (e.g. --devices cpu "
                          "--precisions fp32,bf16).");
  // ARCH-17 as training applies it, without the loader's share of the cores: profile runs no loader.
  RunConfig process = config;
  process.data.num_workers = 0;
  apply_process_settings(process, profile_options.devices.front(), /*ranks_on_node=*/1).report(session->logger);
  profile_options.iterations = options.iterations;
  profile_options.warmup = options.warmup;
  const int64_t batch_size = options.batch_size > 0 ? options.batch_size : config.train.batch_size;

  // The model exactly as training builds it (same seed), on the CPU until profile_model moves it.
  const ComponentEntry entry = session->registry.find(config.model.component, TP_KIND_MODEL, config.model.key_path);
  at::manual_seed(static_cast<uint64_t>(config.run.seed));
  ModelProxy model(entry, config.model);
  model.to_device(c10::Device(c10::kCPU), c10::kFloat);

  // Inputs: the declared examples are the model's own statement of its input; a configuration
  // can change what fits (image_size, in_features), so check they run, else use real samples.
  model.set_training(false);
  NamedTensors batch;
  std::string source = "examples";
  {
    // No autograd for the trial forward; not InferenceMode, whose tensors the profile could not
    // use outside it.
    const c10::NoGradGuard no_grad;
    ModelRun run = *run_on_model_inputs(model, *entry.info, batch_size, [&] {
      return first_training_batch(config, session->registry, batch_size, "host profile");
    });
    if (!run.why_not_examples.empty()) {
      session->logger.info("host profile: using the training split's first samples (" + run.why_not_examples + ")");
      source = "dataset";
    }
    batch = std::move(run.inputs);
  }
  model.set_training(true);

  ModelProfile profile = profile_model(model, batch, profile_options, to_toml_text(config.resolved));
  profile.input_source = source;
  std::printf("%s", profile_table(profile).c_str());
  const std::filesystem::path out =
      options.output.empty() ? session->run_dir / "profile.json" : std::filesystem::path(options.output);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  write_file_atomically(out, profile_json(profile));
  std::printf("\nwritten to %s\n", out.c_str());
  return kExitOk;
}

}  // namespace tp::cli
