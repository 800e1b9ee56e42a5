// One rank of bn_stats_test.cpp's check of sync_batchnorm_statistics: joins the job its
// environment describes (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) over Gloo, synchronises
// bn_sync_inputs.h's states with `broadcast` or `reduce` (argv[1]), and writes every entry's
// values afterwards to argv[2]/rank<R>.txt as "<state> <name> <value>..." with exact hex floats.
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "tp/framework/config/load.h"
#include "tp/framework/dist/batchnorm_sync.h"
#include "tp/framework/dist/collectives.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/rendezvous.h"

#include "bn_sync_inputs.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bn_sync_driver broadcast|reduce OUT_DIR\n");
    return 2;
  }
  try {
    const tp::Rendezvous place = tp::read_rendezvous(tp::process_environment());
    const auto how = tp::try_parse_choice<tp::BatchNormSync>(argv[1]);
    if (!how) {
      std::fprintf(stderr, "bn_sync_driver: %s is not broadcast or reduce\n", argv[1]);
      return 2;
    }
    tp::DistSection options{"gloo", 60.0, 25.0, false, true, *how, true};
    auto dist = tp::DistContext::join(place, options, "cpu");
    const auto model = tp::test::bn_sync_model_state(place.rank);
    const auto average = tp::test::bn_sync_average_state(place.rank);
    const int64_t synced = tp::sync_batchnorm_statistics(*tp::data_parallel_collectives(*dist), {&model, &average}, *how);
    std::ofstream out(std::string(argv[2]) + "/rank" + std::to_string(place.rank) + ".txt");
    out << "synced " << synced << "\n";
    for (const auto* state : {&model, &average}) {
      for (const auto& entry : *state) {
        out << (state == &model ? "model " : "average ") << entry.name;
        const at::Tensor values = entry.tensor.to(at::kDouble).reshape({-1});
        char text[64];
        for (int64_t i = 0; i < values.numel(); ++i) {
          std::snprintf(text, sizeof text, " %a", values[i].item<double>());
          out << text;
        }
        out << "\n";
      }
    }
    return out.good() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bn_sync_driver: %s\n", e.what());
    return 1;
  }
}
