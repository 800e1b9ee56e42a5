// Every function pointer the host hands to plugins (tp_host_t's fail, log, get_service and
// tensor_release, the tp_config_t getters, the visit_state visitor), called from a C frame
// (host_entry_calls.c) under the conditions that used to throw or crash: allocation failure, a
// log sink that throws, NULL arguments. Each must come back with a status, never unwind into the
// plugin (util/abi_guard.h; PLG-7 states the plugin's side of the same rule).
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <new>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <vector>

#include "tp/framework/config/config_view.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/util/log.h"

#include "host_entry_calls.h"
#include "state_visit.h"

#include "support/doctest_after_torch.h"

// Allocation failure on demand: while t_fail_allocations is set on a thread, operator new there
// throws std::bad_alloc, as it does when memory runs out.
namespace {
thread_local bool t_fail_allocations = false;
}  // namespace

void* operator new(std::size_t size) {
  if (t_fail_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace tp;

/// Fails every allocation on this thread while alive.
struct AllocationsFail {
  AllocationsFail() { t_fail_allocations = true; }
  ~AllocationsFail() { t_fail_allocations = false; }
  AllocationsFail(const AllocationsFail&) = delete;
  AllocationsFail& operator=(const AllocationsFail&) = delete;
};

/// std::cerr (the log's sink) throws on every write while alive, as a stream with exceptions
/// enabled does when its device fails.
class CerrThrows {
 public:
  CerrThrows() : saved_(std::cerr.rdbuf(&buffer_)), saved_exceptions_(std::cerr.exceptions()) {
    std::cerr.exceptions(std::ios::badbit);
  }
  ~CerrThrows() {
    std::cerr.exceptions(saved_exceptions_);
    std::cerr.clear();
    std::cerr.rdbuf(saved_);
  }
  CerrThrows(const CerrThrows&) = delete;
  CerrThrows& operator=(const CerrThrows&) = delete;

 private:
  struct Buffer : std::streambuf {
    int_type overflow(int_type) override { throw std::runtime_error("the log device failed (test)"); }
    std::streamsize xsputn(const char*, std::streamsize) override {
      throw std::runtime_error("the log device failed (test)");
    }
  };
  Buffer buffer_;
  std::streambuf* saved_;
  std::ios::iostate saved_exceptions_;
};

struct HostEntryHost {
  Logger logger;
  HostServices services{logger, ProcessPlace{3, 8, 1, 2}};
  const tp_host_t* table() const { return services.table(); }
};

const std::string kLongMessage(200, 'x');  // past the small-string buffer: copying it allocates

/// Runs `call` and says whether an exception came out of it. No doctest macro runs while
/// allocations fail or the log sink throws (doctest itself may allocate or print).
template <typename Call>
bool unwinds(Call&& call) {
  try {
    call();
    return false;
  } catch (...) {
    return true;
  }
}

TEST_CASE("host->fail returns the plugin's code even when the message cannot be stored") {
  HostEntryHost host;
  int returned = 0;
  tp_status status = TP_OK;
  bool escaped = false;
  {
    AllocationsFail no_memory;
    escaped = unwinds([&] { status = tp_test_call_fail(host.table(), TP_ERR_IO, kLongMessage.c_str(), &returned); });
  }
  CHECK_FALSE(escaped);
  CHECK(returned == 1);
  CHECK(status == TP_ERR_IO);
  CHECK(HostServices::take_last_error().empty());  // the host then reports the bare code

  returned = 0;
  CHECK(tp_test_call_fail(host.table(), TP_ERR_CONFIG, kLongMessage.c_str(), &returned) == TP_ERR_CONFIG);
  CHECK(returned == 1);
  CHECK(HostServices::take_last_error() == kLongMessage);
  CHECK(tp_test_call_fail(host.table(), TP_ERR_CONFIG, nullptr, &returned) == TP_ERR_CONFIG);
  CHECK(HostServices::take_last_error().empty());
}

TEST_CASE("host->log never unwinds into the plugin: a failing sink, NULL host data, NULL message") {
  HostEntryHost host;
  int returned = 0;
  bool escaped = false;
  {
    CerrThrows failing_sink;
    escaped = unwinds([&] { tp_test_call_log(host.table(), TP_LOG_ERROR, "a line the sink cannot take", &returned); });
  }
  CHECK_FALSE(escaped);
  CHECK(returned == 1);

  returned = 0;
  {
    AllocationsFail no_memory;
    escaped = unwinds([&] { tp_test_call_log(host.table(), TP_LOG_ERROR, kLongMessage.c_str(), &returned); });
  }
  CHECK_FALSE(escaped);
  CHECK(returned == 1);

  tp_host_t copy = *host.table();  // a plugin that copied the struct and lost host_data
  copy.host_data = nullptr;
  returned = 0;
  CHECK_NOTHROW(tp_test_call_log(&copy, TP_LOG_ERROR, "lost", &returned));
  CHECK(returned == 1);
  returned = 0;
  CHECK_NOTHROW(tp_test_call_log(host.table(), TP_LOG_ERROR, nullptr, &returned));
  CHECK(returned == 1);
}

TEST_CASE("host->get_service answers NULL for a NULL host, a NULL or unknown id, and the table otherwise") {
  HostEntryHost host;
  int returned = 0;
  CHECK(tp_test_call_get_service(host.table(), nullptr, TP_SERVICE_DIST_V1, &returned) == nullptr);
  CHECK(returned == 1);
  CHECK(tp_test_call_get_service(host.table(), host.table(), nullptr, &returned) == nullptr);
  CHECK(tp_test_call_get_service(host.table(), host.table(), "tp.nothing/1", &returned) == nullptr);
  const auto* dist = static_cast<const tp_dist_v1_t*>(
      tp_test_call_get_service(host.table(), host.table(), TP_SERVICE_DIST_V1, &returned));
  REQUIRE(dist != nullptr);
  CHECK(dist->struct_size == sizeof(tp_dist_v1_t));
  CHECK(dist->rank == 3);
  CHECK(dist->world_size == 8);
}

TEST_CASE("host->tensor_release takes NULL and releases a new reference") {
  HostEntryHost host;
  int returned = 0;
  CHECK_NOTHROW(tp_test_call_tensor_release(host.table(), nullptr, &returned));
  CHECK(returned == 1);
  const at::Tensor kept = at::ones({2});
  auto* handle = new at::Tensor(kept);
  CHECK(kept.use_count() == 2);
  returned = 0;
  tp_test_call_tensor_release(host.table(), reinterpret_cast<tp_tensor>(handle), &returned);
  CHECK(returned == 1);
  CHECK(kept.use_count() == 1);
}

TEST_CASE("the visit_state visitor turns a failure to store the entry into a status") {
  std::vector<StateTensor> state;
  at::Tensor weight = at::zeros({3});
  const std::string name = "a.parameter.name.long.enough.to.need.its.own.allocation.weight";
  auto handle = reinterpret_cast<tp_tensor>(&weight);
  int returned = 0;
  tp_status status = TP_OK;
  bool escaped = false;
  {
    AllocationsFail no_memory;
    escaped = unwinds(
        [&] { status = tp_test_call_visitor(&tp::detail::collect_state_entry, &state, name.c_str(), handle, &returned); });
  }
  CHECK_FALSE(escaped);
  CHECK(returned == 1);
  CHECK(status == TP_ERR_OUT_OF_MEMORY);
  CHECK(state.empty());
  (void)HostServices::take_last_error();

  CHECK(tp_test_call_visitor(&tp::detail::collect_state_entry, &state, nullptr, handle, &returned) == TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_test_call_visitor(&tp::detail::collect_state_entry, &state, name.c_str(), nullptr, &returned) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(tp_test_call_visitor(&tp::detail::collect_state_entry, nullptr, name.c_str(), handle, &returned) ==
        TP_ERR_INVALID_ARGUMENT);
  REQUIRE(tp_test_call_visitor(&tp::detail::collect_state_entry, &state, name.c_str(), handle, &returned) == TP_OK);
  REQUIRE(state.size() == 1);
  CHECK(state[0].name == name);
  CHECK(state[0].tensor.is_same(weight));  // an alias: in-place updates reach the plugin's tensor
}

TEST_CASE("the config getters turn a failure to build their message into a status") {
  ConfigView view(toml::table{{"steps", 3}}, "org.test.component",
                  [](tp_status code, const std::string& message) {
                    HostServices::set_last_error(message);
                    return code;
                  });
  int64_t value = 0;
  int returned = 0;
  tp_status status = TP_OK;
  bool escaped = false;
  {
    AllocationsFail no_memory;  // the "key is not declared" message cannot be built
    escaped = unwinds([&] { status = tp_test_call_get_int(view.view(), "undeclared_key", &value, &returned); });
  }
  CHECK_FALSE(escaped);
  CHECK(returned == 1);
  CHECK(status == TP_ERR_OUT_OF_MEMORY);
  CHECK(tp_test_call_get_int(view.view(), "undeclared_key", &value, &returned) == TP_ERR_CONFIG);
  CHECK(HostServices::take_last_error().find("undeclared_key") != std::string::npos);
  CHECK(tp_test_call_get_int(view.view(), "steps", &value, &returned) == TP_OK);
  CHECK(value == 3);
}

}  // namespace
