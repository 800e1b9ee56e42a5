// One rank of plugin_dist_test.cpp's check of the "tp.dist/2" service (ABI 1.14) as a plugin
// sees it: joins the job its environment describes over Gloo, lends the group to a HostServices
// and calls the table get_service returns, through the tp_host_t, as a plugin would. Writes
// each outcome to argv[1]/rank<R>.txt, one line per case: values, or "status <code> <message>".
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tp/framework/config/load.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/rendezvous.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/util/log.h"

namespace {

std::string values(const at::Tensor& tensor) {
  std::string text;
  const at::Tensor flat = tensor.detach().to(at::kDouble).reshape({-1});
  for (int64_t i = 0; i < flat.numel(); ++i) text += " " + std::to_string(flat[i].item<double>());
  return text;
}

/// The loss both ranks' rows enter: NT-Xent-like, each local row an anchor against every gathered
/// row but itself, the positive at `positive_of` (a global index); the SUM over local anchors.
at::Tensor contrastive_sum(const at::Tensor& local, const at::Tensor& all, int64_t offset) {
  const int64_t n = local.size(0), total = all.size(0);
  const at::Tensor logits = at::matmul(local, all.t()).div(0.3);
  const at::Tensor rows = at::arange(n, at::kLong);
  const at::Tensor masked = logits.index_put({rows, rows + offset}, at::full({}, -INFINITY, logits.options()));
  const at::Tensor positive = (rows + offset + 1).remainder(total);
  return (at::logsumexp(masked, 1) - masked.gather(1, positive.unsqueeze(1)).squeeze(1)).sum();
}

/// Rank r's rows: 3 on rank 0, 2 on rank 1 (the counts may differ), 4 columns, fixed values.
at::Tensor rows_of(int rank) {
  const int64_t n = rank == 0 ? 3 : 2;
  return at::sin(at::arange(n * 4, at::kDouble).add(10.0 * (rank + 1))).reshape({n, 4});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: plugin_dist_driver OUT_DIR\n");
    return 2;
  }
  try {
    const tp::Rendezvous place = tp::read_rendezvous(tp::process_environment());
    tp::DistSection options{"gloo", 60.0, 25.0, false, true, tp::BatchNormSync::kBroadcast, true};
    auto dist = tp::DistContext::join(place, options, "cpu");
    tp::Logger logger(place.rank);
    tp::HostServices services(logger, tp::ProcessPlace{place.rank, place.world_size, place.local_rank,
                                                       place.local_world_size});
    const tp_host_t* host = services.table();
    std::ofstream out(std::string(argv[1]) + "/rank" + std::to_string(place.rank) + ".txt");
    const auto status_line = [&](tp_status status) {
      return " status " + std::to_string(status) + " " + (status != TP_OK ? tp::HostServices::take_last_error() : "");
    };
    const auto* table = static_cast<const tp_dist_v2_t*>(host->get_service(host, TP_SERVICE_DIST_V2));
    // Before the group is lent: several ranks, no group, so a call is refused, not run alone.
    at::Tensor early = at::ones({2}, at::kDouble);
    out << "unattached" << status_line(table->all_reduce(host, reinterpret_cast<tp_tensor>(&early), TP_REDUCE_SUM))
        << "\n";
    services.attach_process_group(*dist);
    out << "place " << table->rank << " " << table->world_size << " " << (table->struct_size == sizeof(tp_dist_v2_t))
        << "\n";
    const double mine = place.rank + 1.0;
    for (const auto& [name, op] : {std::pair{"sum", TP_REDUCE_SUM}, {"mean", TP_REDUCE_MEAN}, {"max", TP_REDUCE_MAX}}) {
      at::Tensor t = at::tensor(std::vector<double>{mine, -10.0 * mine}, at::kDouble);
      const tp_status status = table->all_reduce(host, reinterpret_cast<tp_tensor>(&t), op);
      out << name << values(t) << status_line(status) << "\n";
    }
    at::Tensor counts = at::full({3}, static_cast<int64_t>(place.rank + 1), at::kLong);
    out << "int_sum" << status_line(table->all_reduce(host, reinterpret_cast<tp_tensor>(&counts), TP_REDUCE_SUM))
        << values(counts) << "\n";
    out << "int_mean" << status_line(table->all_reduce(host, reinterpret_cast<tp_tensor>(&counts), TP_REDUCE_MEAN))
        << "\n";
    at::Tensor with_grad = at::ones({2}, at::kDouble).requires_grad_(true);
    out << "requires_grad"
        << status_line(table->all_reduce(host, reinterpret_cast<tp_tensor>(&with_grad), TP_REDUCE_SUM)) << "\n";

    // The gather with its gradient against the oracle: every rank's loss over the gathered rows,
    // summed, differentiated on one process with both ranks' rows in hand.
    const at::Tensor x = rows_of(place.rank).requires_grad_(true);
    tp_tensor gathered = nullptr;
    int64_t offset = -1;
    const tp_status gather_status =
        table->all_gather(host, reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&x)), &gathered, &offset);
    out << "gather_status" << status_line(gather_status) << " offset " << offset << "\n";
    const at::Tensor all = *reinterpret_cast<at::Tensor*>(gathered);
    host->tensor_release(host, gathered);
    contrastive_sum(x, all, offset).backward();
    const at::Tensor x0 = rows_of(0).requires_grad_(true), x1 = rows_of(1).requires_grad_(true);
    const at::Tensor both = at::cat({x0, x1});
    (contrastive_sum(x0, both, 0) + contrastive_sum(x1, both, 3)).backward();
    const at::Tensor expected = place.rank == 0 ? x0.grad() : x1.grad();
    out << "gathered " << all.size(0) << " " << all.requires_grad() << " "
        << (all.detach() - both.detach()).abs().max().item<double>() << "\n";
    out << "gradient " << (x.grad() - expected).abs().max().item<double>() << " " << expected.abs().max().item<double>()
        << "\n";

    // Rows that do not fit together: both ranks refuse with the same message, then stay in step.
    const at::Tensor wide = at::zeros({1, place.rank == 0 ? 2 : 3}, at::kDouble);
    tp_tensor none = nullptr;
    const tp_status refused =
        table->all_gather(host, reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&wide)), &none, nullptr);
    out << "mismatch" << status_line(refused)
        << " null " << (none == nullptr) << "\n";

    // Inside an evaluation (LocalPluginCalls): local, the identity, nothing sent.
    {
      auto collectives = tp::data_parallel_collectives(*dist);
      const tp::LocalPluginCalls local(*collectives);
      at::Tensor t = at::tensor(std::vector<double>{mine}, at::kDouble);
      const tp_status reduced = table->all_reduce(host, reinterpret_cast<tp_tensor>(&t), TP_REDUCE_SUM);
      tp_tensor own = nullptr;
      int64_t own_offset = -1;
      const tp_status gathered_local =
          table->all_gather(host, reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&x)), &own, &own_offset);
      out << "local" << values(t) << " rows " << reinterpret_cast<at::Tensor*>(own)->size(0) << " offset " << own_offset
          << status_line(reduced)
          << status_line(gathered_local) << "\n";
      host->tensor_release(host, own);
    }
    at::Tensor after = at::tensor(std::vector<double>{mine}, at::kDouble);
    out << "after" << status_line(table->all_reduce(host, reinterpret_cast<tp_tensor>(&after), TP_REDUCE_SUM))
        << values(after) << "\n";

    // A single process (world_size 1, no process group): both calls are the identity.
    tp::HostServices alone(logger, tp::ProcessPlace{});
    const auto* single =
        static_cast<const tp_dist_v2_t*>(alone.table()->get_service(alone.table(), TP_SERVICE_DIST_V2));
    at::Tensor t = at::tensor(std::vector<double>{mine, 2.0}, at::kDouble);
    const tp_status mean = single->all_reduce(alone.table(), reinterpret_cast<tp_tensor>(&t), TP_REDUCE_MEAN);
    tp_tensor own = nullptr;
    const tp_status gathered_alone =
        single->all_gather(alone.table(), reinterpret_cast<tp_tensor>(const_cast<at::Tensor*>(&x)), &own, nullptr);
    const at::Tensor own_rows = *reinterpret_cast<at::Tensor*>(own);
    out << "single " << single->world_size << values(t) << " same " << own_rows.is_same(x) << status_line(mean)
        << status_line(gathered_alone) << "\n";
    alone.table()->tensor_release(alone.table(), own);
    return out.good() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plugin_dist_driver: %s\n", e.what());
    return 1;
  }
}
