// The tp_host_t the host lends to every plugin: per-thread error messages, logging, services
// ("tp.dist/1", "tp.dist/2") and tensor-handle release (plugin_api/include/tp/host.h).
#pragma once

#include <memory>
#include <string>

#include "tp/host.h"

namespace tp {

class Collectives;
class DistContext;
class Logger;

/// Where this process sits in a distributed run (defaults: a single process).
struct ProcessPlace {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
};

/// Owns the tp_host_t table. Must outlive every plugin library (the registry holds it).
class HostServices {
 public:
  HostServices(Logger& logger, ProcessPlace place);
  ~HostServices();
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  /// The table handed to plugins; valid as long as this object.
  const tp_host_t* table() const { return &host_; }
  /// The calling thread's last message recorded through fail(), and clears it. A plugin call that
  /// returned an error without calling fail() yields "" (the caller reports the bare code).
  static std::string take_last_error();
  /// Records a message as fail() does; used by host-side adapters (the config view, the state
  /// visitor). Moving the string in allocates nothing, so it cannot throw.
  static void set_last_error(std::string message) noexcept;
  Logger& logger() const { return logger_; }
  /// The "tp.dist/1" table get_service() returns.
  const tp_dist_v1_t* dist_service() const { return &dist_; }
  /// The "tp.dist/2" table get_service() returns (plugin/dist_service.cpp).
  const tp_dist_v2_t* dist2_service() const { return &dist2_; }
  /// [main] Lends the joined process group to plugins' tp.dist/2 calls (the session, right after
  /// joining it). `dist` must outlive every plugin call; before this, a process of several
  /// ranks refuses the calls (TP_ERR_UNSUPPORTED) and a single one runs them as the identity.
  void attach_process_group(DistContext& dist);
  /// The collectives tp.dist/2 runs on, and their process group; null until attach_process_group.
  Collectives* plugin_collectives() const { return plugin_collectives_.get(); }
  DistContext* process_group() const { return process_group_; }
  /// The place the tables report.
  int world_size() const { return dist_.world_size; }

 private:
  tp_host_t host_{};
  tp_dist_v1_t dist_{};
  tp_dist_v2_t dist2_{};
  std::unique_ptr<Collectives> plugin_collectives_;
  DistContext* process_group_ = nullptr;
  Logger& logger_;
};

/// Readable name of a tp_status code ("TP_ERR_IO").
const char* status_name(tp_status status);

}  // namespace tp
