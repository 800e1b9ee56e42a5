#include "start_agreement.h"

#include <ATen/ATen.h>

#include <exception>
#include <string>
#include <vector>

#include "tp/framework/config/config_changes.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/config/write.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/error.h"

namespace tp::cli {
namespace {

/// Another rank's failure, as this rank ends on it: that rank's exit code, so the launcher and a
/// scheduler see one reason whichever rank they ask.
class RankFailure : public Error {
 public:
  RankFailure(const std::string& message, int exit_code) : Error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept override { return exit_code_; }

 private:
  int exit_code_;
};

/// The exit code `host` gives `error` (main.cpp's mapping: tp::Error says its own, others 1).
int exit_code_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.exit_code();
  } catch (...) {
    return kExitRuntime;
  }
}

/// The resolved configuration as every rank must hold it: without the paths each process resolves
/// against its own working directory.
std::string shared_config_text(const RunConfig& config) {
  toml::table table = config.resolved;
  if (auto* run = table.get_as<toml::table>("run")) run->erase("output_dir");
  if (auto* plugins = table.get_as<toml::table>("plugins")) plugins->erase("dirs");
  return to_toml_text(table);
}

}  // namespace

void agree_with_rank0(DistContext* dist, const char* what, const std::string& name, const std::string& own,
                      const std::function<void(const std::string& rank0)>& refuse) {
  if (dist == nullptr) return;
  run_agreed(dist, what, [&] {
    const std::string rank0 = dist->rank0_text(name, own);
    if (own != rank0) refuse(rank0);
  });
}

void agree_on_config(DistContext* dist, const RunConfig& config) {
  if (dist == nullptr) return;
  const std::string own = shared_config_text(config);
  agree_with_rank0(dist, "agree on the configuration", "configuration", own, [&](const std::string& rank0) {
    const std::vector<std::string> changes = config_changes(rank0, own);
    const std::string first = changes.empty() ? "the text differs, key by key equal" : changes.front();
    const std::string more = changes.size() > 1 ? "; " + std::to_string(changes.size()) + " keys differ" : "";
    throw ConfigError(first.substr(0, first.find(':')),
                      "the resolved configuration differs from rank 0's: " + first + " (rank 0's value -> rank " +
                          std::to_string(dist->rank()) + "'s" + more +
                          "). Every rank of a run must resolve the same configuration: start them with the same config "
                          "file, the same --set arguments and the same TP_* environment variables (a node's profile "
                          "may export one).");
  });
}

void run_agreed(DistContext* dist, const char* what, const std::function<void()>& step) {
  if (dist == nullptr) return step();
  std::string failure;
  std::exception_ptr own_error;
  try {
    step();
  } catch (const std::exception& e) {
    failure = e.what();
    own_error = std::current_exception();
  }
  const std::string first = dist->first_failure(failure, what);
  if (first.empty()) return;
  // Each rank's exit code in its slot: every rank knows that one failed, so every rank joins.
  at::Tensor codes = at::zeros({dist->world_size()}, at::TensorOptions().dtype(at::kInt).device(dist->device()));
  if (own_error) codes[dist->rank()].fill_(exit_code_of(own_error));
  std::vector<at::Tensor> tensors{codes};
  dist->all_reduce_sum(tensors, what);
  if (own_error) std::rethrow_exception(own_error);
  const at::Tensor all = codes.cpu();
  int code = kExitRuntime;
  for (int r = 0; r < dist->world_size(); ++r)
    if (const int rank_code = all[r].item<int>(); rank_code != 0) {
      code = rank_code;
      break;
    }
  throw RankFailure(first + (first.ends_with('.') ? " " : ". ") +
                        "Every rank stops before the first training step (" + what + ").",
                    code);
}

}  // namespace tp::cli
