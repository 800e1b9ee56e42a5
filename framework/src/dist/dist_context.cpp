#include "tp/framework/dist/dist_context.h"

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <thread>

#include "dist/store_connection.h"
#include "tp/framework/engine/runtime_setup.h"
#include "tp/framework/error.h"
#include "tp/framework/exception_text.h"
#include "tp/framework/util/short_number.h"

namespace tp {
namespace {

using Millis = std::chrono::milliseconds;

Millis timeout_of(const DistSection& options) {
  return Millis(static_cast<int64_t>(options.timeout_s * 1000.0));
}

void check_options(const DistSection& o) {
  if (!(o.timeout_s > 0))
    throw ConfigError("dist.timeout_s", "dist.timeout_s = " + short_number(o.timeout_s) +
                                            " must be > 0 (seconds a collective may wait for a lost rank).");
  if (!(o.prepare_timeout_s > 0))
    throw ConfigError("dist.prepare_timeout_s", "dist.prepare_timeout_s = " + short_number(o.prepare_timeout_s) +
                                                    " must be > 0 (seconds the ranks wait for the datasets' prepare).");
  if (!(o.bucket_mb > 0))
    throw ConfigError("dist.bucket_mb", "dist.bucket_mb = " + short_number(o.bucket_mb) +
                                            " must be > 0 (MiB of gradients per all-reduce; 25 is PyTorch's default).");
}

c10::Device pick_device(const Rendezvous& place, const std::string& spec) {
  const bool explicit_index = spec.rfind("cuda:", 0) == 0;
  if (explicit_index && place.local_world_size > 1)
    throw ConfigError("run.device", "run.device = \"" + spec + "\" puts all " + std::to_string(place.local_world_size) +
                                        " ranks of this node on one GPU. Under data-parallel training set run.device = "
                                        "\"cuda\" or \"auto\": rank k of a node uses cuda:LOCAL_RANK.");
  const c10::Device base = resolve_device(spec); // "auto" | "cpu" | "cuda" | "cuda:N"
  if (base.is_cpu() || explicit_index) return base;
  return resolve_device("cuda:" + std::to_string(place.local_rank)); // checks the index exists
}

std::string pick_backend(const DistSection& o, const c10::Device& device) {
  std::string backend = o.backend == "auto" ? (device.is_cuda() ? "nccl" : "gloo") : o.backend;
  if (backend == "nccl" && !device.is_cuda())
    throw ConfigError("dist.backend", "dist.backend = \"nccl\" needs CUDA tensors, but this run uses " + device.str() +
                                          ". Use \"gloo\" (or \"auto\") on CPU.");
#ifndef USE_C10D_NCCL
  if (backend == "nccl")
    throw ConfigError("dist.backend", "dist.backend = \"nccl\": this LibTorch was built without NCCL. Use \"gloo\".");
#endif
  return backend;
}

// The TCP device Gloo talks through. Loopback rendezvous means a single-machine job: bind to
// loopback, which always exists (a sandbox hostname need not resolve). GLOO_SOCKET_IFNAME wins,
// as in PyTorch.
std::shared_ptr<::gloo::transport::Device> gloo_device(const Rendezvous& place) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0')
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (place.master_addr == "localhost" || place.master_addr.rfind("127.", 0) == 0)
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

DistContext::DistContext(Rendezvous place, DistSection options, c10::Device device)
    : place_(std::move(place)), options_(std::move(options)), device_(device) {}

DistContext::~DistContext() = default;

std::unique_ptr<DistContext> DistContext::join(const Rendezvous& place, const DistSection& options,
                                               const std::string& run_device) {
  TP_CHECK(place.distributed(), "DistContext::join needs launcher variables (WORLD_SIZE > 1, or MASTER_ADDR/PORT)");
  check_options(options);
  const c10::Device device = pick_device(place, run_device);
  std::unique_ptr<DistContext> dist(new DistContext(place, options, device));
  dist->backend_ = pick_backend(options, device);
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device); // NCCL picks the current GPU

  // 1. Rendezvous: rank 0 serves the key-value store unless torchrun's agent already does.
  check_master_addr_resolves(place);
  const Millis timeout = timeout_of(options);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(place.master_port);
  store_options.isServer = place.rank == 0 && !place.agent_store;
  store_options.numWorkers = place.world_size;
  store_options.waitWorkers = !place.agent_store;
  store_options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = connect_store(place.master_addr, store_options); // within dist.timeout_s, whoever listens there
  } catch (const std::exception&) {
    throw Error("rank " + std::to_string(place.rank) + " could not " +
                (store_options.isServer ? "host" : "reach") + " the rendezvous store at " + place.master_addr + ":" +
                std::to_string(place.master_port) + " within dist.timeout_s = " + short_number(options.timeout_s) +
                " s: " + exception_text(std::current_exception()) +
                ". Check that MASTER_ADDR/MASTER_PORT are rank 0's reachable address and a free port "
                "(the built-in launcher picks one when --master-port is not given), and that all " +
                std::to_string(place.world_size) + " ranks were started.");
  }
  check_run_identity(*store, place, timeout);
  // Keys of this run under their own prefix: torchrun's agent store also holds the agent's keys,
  // another run may share the store's port (its keys must never be ours), and a restarted
  // torchrun generation must not read the previous one's.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  dist->store_ = c10::make_intrusive<c10d::PrefixStore>(
      "torchhost/" + place.run_id + "/" + (restart != nullptr ? restart : "0") + "/", store);

  // 2. The process group: one backend per device type, as Python's init_process_group builds it.
  auto group = c10::make_intrusive<c10d::ProcessGroup>(dist->store_, place.rank, place.world_size);
  group->setGroupName("torchhost");
  try {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout); // devices: shared_ptr, no Gloo header needed
    gloo_options->devices.push_back(gloo_device(place));
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo/", dist->store_), place.rank, place.world_size, gloo_options);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    if (device.is_cuda() && dist->backend_ == "gloo")
      group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
#ifdef USE_C10D_NCCL
    if (dist->backend_ == "nccl") {
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("nccl/", dist->store_), place.rank, place.world_size, nccl_options);
      group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    }
#endif
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(place.rank) + " could not build the " + dist->backend_ +
                " process group: " + e.what() +
                ". All ranks must reach each other; on several machines set GLOO_SOCKET_IFNAME "
                "(or NCCL_SOCKET_IFNAME) to the interface they share.");
  }
  dist->group_ = group;
  return dist;
}

void DistContext::all_reduce_sum(std::vector<at::Tensor>& tensors, const char* what) {
  try {
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      group_->allreduce(one)->wait();
    }
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

void DistContext::all_reduce_max(std::vector<at::Tensor>& tensors, const char* what) {
  try {
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      group_->allreduce(one, options)->wait();
    }
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

void DistContext::broadcast(const std::vector<at::Tensor>& tensors, const char* what, int root) {
  if (tensors.empty()) return;
  try {
    // Flat buffers of up to 256 MiB: one collective for a small model instead of one per tensor.
    c10d::broadcast_coalesced(group_, tensors, size_t{256} << 20, root);
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

std::vector<at::Tensor> DistContext::all_gather(const at::Tensor& tensor, const char* what) {
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size(); ++r) outputs[0].push_back(at::empty_like(tensor));
  std::vector<at::Tensor> inputs{tensor};
  try {
    group_->allgather(outputs, inputs)->wait();
  } catch (const std::exception& e) {
    fail(what, e);
  }
  return outputs[0];
}

std::string read_failure_message(c10d::Store& store, const std::string& key) {
  try {
    const std::vector<uint8_t> bytes = store.get(key);
    return {bytes.begin(), bytes.end()};
  } catch (const std::exception&) {
    return "it failed, and its message could not be read from the rendezvous store (" +
           exception_text(std::current_exception()) + "); its own output says what failed.";
  }
}

void check_master_addr_resolves(const Rendezvous& place) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(place.master_addr.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (status != EAI_NONAME && status != EAI_FAIL) return;
  throw ConfigError("", "MASTER_ADDR = \"" + place.master_addr + "\" (from " + place.source +
                            " variables) does not resolve to an address (" + ::gai_strerror(status) +
                            "): set it to the address or host name of rank 0's node as the other nodes reach it "
                            "(under SLURM: export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)).");
}

namespace {

std::string describe_run(const std::string& run_id) {
  return run_id.empty() ? "a run without a SLURM, torchrun or launcher id" : run_id;
}

}  // namespace

void check_run_identity(c10d::Store& store, const Rendezvous& place, std::chrono::milliseconds timeout) {
  const std::string key = "torchhost/run";
  const std::string where = place.master_addr + ":" + std::to_string(place.master_port);
  if (place.rank == 0) {
    store.set(key, std::vector<uint8_t>(place.run_id.begin(), place.run_id.end()));
    return;
  }
  try {
    store.wait({key}, timeout);
  } catch (const std::exception&) {
    throw Error("rank " + std::to_string(place.rank) + " of " + describe_run(place.run_id) +
                " reached the rendezvous store at " + where + ", but no rank 0 recorded its run there within " +
                std::to_string(timeout.count() / 1000) +
                " s: the port belongs to something else. Give each run its own MASTER_PORT.");
  }
  const std::vector<uint8_t> bytes = store.get(key);
  const std::string owner(bytes.begin(), bytes.end());
  if (owner != place.run_id)
    throw Error("rank " + std::to_string(place.rank) + " of " + describe_run(place.run_id) +
                " reached the rendezvous store at " + where + " of another run (" + describe_run(owner) +
                ") and does not join it. Two runs derived or were given the same MASTER_PORT on one node; give each "
                "its own (with several srun steps on one node, export a different MASTER_PORT per step; "
                "docs/distributed.md).");
}

std::string DistContext::first_failure(const std::string& own_failure, const char* what) {
  const std::string key = "failure/" + std::to_string(failure_rounds_++) + "/";
  // The store carries the messages; the collectives below carry the decision. A store that fails
  // here must not end this rank before them: the others would then report it as lost.
  if (!own_failure.empty()) try {
      store_->set(key + std::to_string(rank()), std::vector<uint8_t>(own_failure.begin(), own_failure.end()));
    } catch (const std::exception&) {
      // The others say they could not read it; this rank's own return value still carries it.
    }
  at::Tensor failed = at::zeros({world_size()}, at::TensorOptions().dtype(at::kInt).device(device_));
  if (!own_failure.empty()) failed[rank()].fill_(1);
  std::vector<at::Tensor> tensors{failed};
  all_reduce_sum(tensors, what);
  const at::Tensor flags = failed.cpu();
  std::string first;
  for (int r = 0; r < world_size() && first.empty(); ++r) {
    if (flags[r].item<int>() == 0) continue;
    if (r == rank()) {
      first = "rank " + std::to_string(r) + ": " + own_failure;
    } else {
      first = "rank " + std::to_string(r) + ": " + read_failure_message(*store_, key + std::to_string(r));
    }
  }
  // Every rank knows a rank failed: one more collective holds them all until each has read the
  // message, since the failing rank's process may host the store and ends once this returns.
  if (!first.empty()) all_reduce_sum(tensors, what);
  return first;
}

std::string DistContext::rank0_text(const std::string& name, const std::string& text) {
  const std::string key = "rank0/" + name;
  if (rank() == 0) {
    store_->set(key, std::vector<uint8_t>(text.begin(), text.end()));
    return text;
  }
  try {
    const std::vector<uint8_t> bytes = store_->get(key);
    return {bytes.begin(), bytes.end()};
  } catch (const std::exception&) {
    throw Error("rank " + std::to_string(rank()) + " could not read rank 0's " + name +
                " from the rendezvous store within dist.timeout_s = " + short_number(options_.timeout_s) + " s (" +
                exception_text(std::current_exception()) + "); rank 0 did not get this far, and its own output says why.");
  }
}

void DistContext::raise_notice(const std::string& name) noexcept {
  try {
    store_->set("notice/" + name, std::vector<uint8_t>{1});
  } catch (const std::exception&) {
    // The note only hastens what a collective agrees anyway.
  }
}

bool DistContext::notice_raised(const std::string& name) noexcept {
  try {
    return store_->check({"notice/" + name});
  } catch (const std::exception&) {
    return false;
  }
}

void DistContext::meet(const std::string& name, std::chrono::milliseconds timeout, std::chrono::milliseconds first_note,
                       std::chrono::milliseconds every, const std::function<void(int arrived, double seconds)>& waiting) {
  const std::string key = "meet/" + std::to_string(meetings_++) + "/" + name;
  const auto start = std::chrono::steady_clock::now();
  int64_t arrived = store_->add(key, 1);
  auto next_note = start + first_note;
  while (arrived < world_size()) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start).count();
    if (now - start >= timeout)
      throw Error(std::to_string(arrived) + " of " + std::to_string(world_size()) + " ranks reached \"" + name +
                  "\" within " + std::to_string(std::chrono::duration<double>(timeout).count()) +
                  " s; the others are still at work there, or were lost.");
    if (now >= next_note && waiting) {
      waiting(static_cast<int>(arrived), seconds);
      next_note = now + every;
    }
    std::this_thread::sleep_for(Millis(100));
    arrived = store_->add(key, 0);
  }
}

void DistContext::fail(const char* what, const std::exception& error) {
  // Which ranks still answer: each survivor leaves a key in the store and looks for the others'
  // after a short wait. A rank that was killed leaves none. If rank 0 hosted the store and died,
  // the store itself is gone, which names rank 0.
  std::string lost;
  try {
    store_->set("alive/" + std::to_string(rank()), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + std::min(timeout_of(options_), Millis(3000));
    std::vector<int> missing;
    do {
      std::this_thread::sleep_for(Millis(200));
      missing.clear();
      for (int r = 0; r < world_size(); ++r)
        if (!store_->check({"alive/" + std::to_string(r)})) missing.push_back(r);
    } while (!missing.empty() && std::chrono::steady_clock::now() < deadline);
    for (int r : missing) lost += (lost.empty() ? "" : ", ") + std::to_string(r);
    lost = lost.empty() ? "every rank still answers the store (a rank may be stalled, or the network failed)"
                        : "lost rank(s): " + lost + " (they no longer answer)";
  } catch (const std::exception&) {
    lost = place_.agent_store ? "the rendezvous store (torchrun's agent) is unreachable"
                              : "lost rank 0: the rendezvous store it hosted is gone";
  }
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  const std::string said = c10_error != nullptr ? c10_error->what_without_backtrace() : error.what();
  throw Error("rank " + std::to_string(rank()) + " of " + std::to_string(world_size()) + ": the " + backend_ +
              " collective `" + what + "` failed; " + lost + ". c10d said: " + said +
              " Look at the lost rank's own output for its error; continue with --resume auto once it is fixed "
              "(collectives wait at most dist.timeout_s = " + short_number(options_.timeout_s) + " s).");
}

}  // namespace tp
