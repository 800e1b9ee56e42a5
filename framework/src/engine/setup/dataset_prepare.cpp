// prepare_datasets (run_components.h): the datasets' once-per-node preparation (ABI 1.5, PLG-17),
// before any rank creates a dataset. The ranks first meet in the rendezvous store, waiting up to
// dist.prepare_timeout_s and saying so in the log (a first listing of ImageNet takes longer than
// dist.timeout_s), then pass on a failure in one all-reduce (first_failure), so every rank learns
// the failing rank's message instead of timing out.
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "tp/framework/dist/dist_context.h"
#include "tp/framework/engine/run_components.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/util/short_number.h"

namespace tp {

std::vector<std::string> prepare_datasets(const RunConfig& config, const Registry& registry, DatasetSplits splits,
                                          int local_rank, DistContext* dist,
                                          const std::function<void(const std::string&)>& waiting) {
  std::vector<std::string> lines;
  std::string failure;
  std::exception_ptr own_error; // rethrown unchanged on the rank that failed
  std::vector<std::string> names;
  if (splits.train) names.emplace_back("train");
  if (splits.val) names.emplace_back("val");
  if (splits.test) names.emplace_back("test");
  if (local_rank == 0) {
    try {
      for (const std::string& split : names) {
        const ComponentConfig* table = dataset_table(config, split);
        if (table == nullptr) continue;
        const ComponentEntry entry = registry.find(table->component, TP_KIND_DATASET, table->key_path);
        const auto start = std::chrono::steady_clock::now();
        if (!DatasetProxy::prepare(entry, *table, split)) continue;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        lines.push_back("prepared the " + split + " split of " + table->component + " (" + table->key_path + ") in " +
                        short_number(seconds, 3) + " s on local rank 0");
      }
    } catch (const std::exception& e) { // not only tp::Error: any failure here must reach the waiting ranks
      if (dist == nullptr) throw;
      failure = e.what();
      own_error = std::current_exception();
    }
  }
  if (dist == nullptr) return lines;
  const double limit = config.dist.prepare_timeout_s;
  try {
    // Quiet when everyone is there within 2 s (datasets without a prepare entry), then a note
    // every 30 s.
    dist->meet("prepare", std::chrono::milliseconds(static_cast<int64_t>(limit * 1000.0)), std::chrono::seconds(2),
               std::chrono::seconds(30),
               [&](int arrived, double seconds) {
                 if (waiting)
                   waiting("waits for the datasets' prepare on local rank 0 (" +
                           std::to_string(arrived) + " of " + std::to_string(dist->world_size()) + " ranks ready after " +
                           std::to_string(static_cast<int64_t>(seconds)) + " s; at most dist.prepare_timeout_s = " +
                           std::to_string(static_cast<int64_t>(limit)) + " s)");
               });
  } catch (const Error& e) {
    if (own_error) std::rethrow_exception(own_error);
    throw Error(std::string("waiting for the datasets' prepare: ") + e.what() +
                " Raise dist.prepare_timeout_s if local rank 0 needs longer (its log says how far it got).");
  }
  const std::string first = dist->first_failure(failure, "wait for the datasets' prepare on local rank 0 of each node");
  if (first.empty()) return lines;
  if (own_error) std::rethrow_exception(own_error);
  throw Error("dataset preparation failed on " + first +
              " (every rank stops: the data is not ready). Fix what it says, then start the run again.");
}

}  // namespace tp
