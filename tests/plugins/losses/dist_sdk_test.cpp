// tp/cpp/dist.h on its own (ABI 1.14): tp::cpp::Collectives against fake hosts. An older host,
// whose get_service answers NULL for "tp.dist/2", makes require() refuse with TP_ERR_UNSUPPORTED
// naming the service and the ABI, and a component that requires it fails its create with that
// message; available() says false. A host with the service: all_gather hands back the result and
// this rank's offset and releases the handle; a failed call's message is the host's, which
// TP_GUARD keeps (HostFailure: no second fail() replaces it). The service itself is tested on 2
// ranks in tests/dist/plugin_dist_test.cpp.
#include "tp/cpp/dist.h"  // before the harness: c10's CHECK is replaced by doctest's there
#include "tp/cpp/loss_adapter.h"

#include <ATen/ATen.h>

#include <cstring>
#include <string>

#include "support/plugin_harness.h"

namespace {

using tp::test::FakeConfig;
using tp::test::FakeHost;

/// The fake service: all_gather of a 0-dim input fails through host->fail; otherwise it returns
/// the input twice over and an offset of 2. all_reduce doubles the tensor.
tp_status fake_all_gather(const tp_host_t* host, tp_tensor input, tp_tensor* out, int64_t* offset) {
  const at::Tensor& rows = *reinterpret_cast<const at::Tensor*>(input);
  if (rows.dim() == 0) return host->fail(host, TP_ERR_INVALID_ARGUMENT, "tp.dist/2 all_gather: the input has 0 dims");
  *out = reinterpret_cast<tp_tensor>(new at::Tensor(at::cat({rows, rows})));
  if (offset != nullptr) *offset = 2;
  return TP_OK;
}
tp_status fake_all_reduce(const tp_host_t*, tp_tensor tensor, int32_t) {
  reinterpret_cast<at::Tensor*>(tensor)->mul_(2);
  return TP_OK;
}
const tp_dist_v2_t kFakeDist = {sizeof(tp_dist_v2_t), 1, 2, 1, 2, &fake_all_reduce, &fake_all_gather};

/// A host of ABI 1.14 with the fake service and a working tensor_release.
struct NewHost : FakeHost {
  NewHost() {
    host.get_service = [](const tp_host_t*, const char* id) -> const void* {
      return std::strcmp(id, TP_SERVICE_DIST_V2) == 0 ? &kFakeDist : nullptr;
    };
    host.tensor_release = [](const tp_host_t*, tp_tensor handle) { delete reinterpret_cast<at::Tensor*>(handle); };
  }
};

/// A loss that needs the service: sums what all_gather returns.
class Gathering {
 public:
  explicit Gathering(const tp::cpp::ConfigReader&) : dist_(tp::cpp::Collectives::require()) {}
  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields&) {
    const at::Tensor all = dist_.all_gather(outputs.get("y"));
    return {all.sum(), at::scalar_tensor(all.size(0), at::TensorOptions().dtype(at::kLong))};
  }

 private:
  tp::cpp::Collectives dist_;
};

const tp_config_key_t kNoKeys[] = {{sizeof(tp_config_key_t), "unused", TP_CFG_INT, "0", "nothing"}};
const tp_descriptor_t kGatheringDescriptor =
    tp::cpp::loss_descriptor("org.torchhost.test.gathering", "1.0.0", "gathers", kNoKeys);
const tp::cpp::Component kGathering = tp::cpp::loss_component<Gathering, kGatheringDescriptor>();
const tp_loss_v1_t& gathering_table() { return *static_cast<const tp_loss_v1_t*>(kGathering.table); }

/// Makes `host` the library's host for the scope (the adapters' classes find it through plugin_host()).
struct AsLibraryHost {
  explicit AsLibraryHost(const tp_host_t* host) { tp::cpp::plugin_host() = host; }
  ~AsLibraryHost() { tp::cpp::plugin_host() = nullptr; }
};

}  // namespace

TEST_CASE("tp::cpp::Collectives on a host older than ABI 1.14: refused by name, or available() false") {
  FakeHost old; // get_service answers NULL for every id, as a 1.13 host does for "tp.dist/2"
  CHECK_FALSE(tp::cpp::Collectives::available(&old.host));
  try {
    (void)tp::cpp::Collectives::require(&old.host);
    FAIL("require() accepted a host without tp.dist/2");
  } catch (const tp::cpp::Failure& e) {
    CHECK(e.code() == TP_ERR_UNSUPPORTED);
    CHECK(std::string(e.what()).find("\"tp.dist/2\"") != std::string::npos);
    CHECK(std::string(e.what()).find("1.14") != std::string::npos);
  }
  const AsLibraryHost library(&old.host);
  FakeConfig cfg;
  void* self = nullptr;
  CHECK(gathering_table().create(&old.host, &cfg.view, &self) == TP_ERR_UNSUPPORTED);
  CHECK(self == nullptr);
  CHECK(old.last_error.find("needs the host service \"tp.dist/2\"") != std::string::npos);
}

TEST_CASE("tp::cpp::Collectives: the gather's result and offset, the reduction, and the host's own message") {
  NewHost host;
  const tp::cpp::Collectives dist = tp::cpp::Collectives::require(&host.host);
  CHECK(dist.rank() == 1);
  CHECK(dist.world_size() == 2);
  int64_t offset = -1;
  const at::Tensor rows = at::tensor({1.0f, 2.0f});
  const at::Tensor all = dist.all_gather(rows, &offset);
  CHECK(all.size(0) == 4);
  CHECK(offset == 2);
  at::Tensor statistic = at::tensor({3.0f});
  dist.all_reduce(statistic, tp::cpp::Reduce::kMean);
  CHECK(statistic.item<float>() == 6.0f);

  // Through the loss adapter: the service's failure reaches the host with the service's message.
  const AsLibraryHost library(&host.host);
  FakeConfig cfg;
  void* self = nullptr;
  REQUIRE(gathering_table().create(&host.host, &cfg.view, &self) == TP_OK);
  const at::Tensor scalar = at::scalar_tensor(1.0f);
  const tp_named_tensor_t outputs[] = {{"y", tp::test::handle_of(scalar)}};
  tp_tensor sum = nullptr, count = nullptr;
  CHECK(gathering_table().forward(self, outputs, 1, nullptr, 0, &sum, &count) == TP_ERR_INVALID_ARGUMENT);
  CHECK(host.last_error == "tp.dist/2 all_gather: the input has 0 dims");
  CHECK(sum == nullptr);
  const tp_named_tensor_t good[] = {{"y", tp::test::handle_of(rows)}};
  REQUIRE(gathering_table().forward(self, good, 1, nullptr, 0, &sum, &count) == TP_OK);
  CHECK(tp::test::tensor_of(sum).item<float>() == 6.0f);
  delete reinterpret_cast<at::Tensor*>(sum);
  delete reinterpret_cast<at::Tensor*>(count);
  gathering_table().destroy(self);
}
