#include "start_agreement.h"

#include <ATen/ATen.h>

#include <exception>
#include <string>
#include <vector>

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

}  // namespace

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
