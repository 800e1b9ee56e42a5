// One rank of gather_rows_test.cpp's check of Collectives::all_gather_rows (the gather of a
// metric's rows, plugin ABI 1.7): joins the job its environment describes over Gloo, gathers rows
// of different counts, rows where one or every rank has none, then rows of another width and
// rows of no dims on rank 1 only, and writes each outcome to argv[1]/rank<R>.txt: the gathered
// values, or "threw" and the message.
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

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gather_rows_driver OUT_DIR\n");
    return 2;
  }
  try {
    const tp::Rendezvous place = tp::read_rendezvous(tp::process_environment());
    tp::DistSection options{"gloo", 60.0, 25.0, false, true, tp::BatchNormSync::kBroadcast, true};
    auto dist = tp::DistContext::join(place, options, "cpu");
    auto collectives = tp::data_parallel_collectives(*dist);
    const bool first = place.rank == 0;
    std::ofstream out(std::string(argv[1]) + "/rank" + std::to_string(place.rank) + ".txt");
    const auto outcome = [&](const char* name, const std::function<at::Tensor()>& rows) {
      out << name;
      try {
        const at::Tensor all = collectives->all_gather_rows(rows(), name);
        out << " rows " << all.size(0) << " width " << (all.dim() > 1 ? all.size(1) : 0);
        const at::Tensor flat = all.to(at::kDouble).reshape({-1});
        for (int64_t i = 0; i < flat.numel(); ++i) out << " " << flat[i].item<double>();
      } catch (const std::exception& e) {
        out << " threw " << e.what();
      }
      out << "\n";
    };
    const auto rows = [](std::vector<double> values, int64_t width) {
      return at::tensor(values, at::kDouble).reshape({-1, width});
    };
    outcome("counts", [&] { return first ? rows({0, 1, 2, 3, 4, 5}, 2) : rows({10, 11}, 2); });
    outcome("one_empty", [&] { return first ? rows({0, 1, 2, 3}, 2) : rows({}, 2); });
    outcome("all_empty", [&] { return rows({}, 2); });
    outcome("width", [&] { return first ? rows({0, 1}, 2) : rows({0, 1, 2}, 3); });
    outcome("no_dims", [&] { return first ? rows({0, 1}, 2) : at::scalar_tensor(1.0, at::kDouble); });
    // The ranks are still in step after the refusals: a last gather works.
    outcome("after", [&] { return rows({first ? 1.0 : 2.0}, 1); });
    return out.good() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gather_rows_driver: %s\n", e.what());
    return 1;
  }
}
