#include "failure.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>
#include <string>

#include "tp/framework/checkpoint/checkpoint_seal.h"
#include "tp/framework/error.h"
#include "tp/status.h"

namespace tp::infer::detail {
namespace {

using Kind = Error::Kind;

Error error(const std::string& what, Kind kind) {
  const std::string text = what.starts_with("tp::infer: ") ? what : "tp::infer: " + what;
  return Error(text, names_allocation_failure(what) ? Kind::OutOfMemory : kind);
}

// A plugin call's status, by whose fault it is: its create or prepare runs on the export's table.
Kind plugin_kind(const PluginError& e, const FailureKinds& kinds) {
  if (e.status() == TP_ERR_OUT_OF_MEMORY) return Kind::OutOfMemory;
  if (e.function() == "create" || e.function() == "prepare") return Kind::Setup;
  if (e.status() == TP_ERR_INVALID_ARGUMENT || e.status() == TP_ERR_OUT_OF_RANGE) return kinds.refused_input;
  return Kind::Internal;
}

}  // namespace

bool names_allocation_failure(std::string_view message) {
  const bool cpu = message.find("DefaultCPUAllocator") != std::string_view::npos &&
                   message.find("you tried to allocate") != std::string_view::npos;
  return cpu || message.find("CUDA out of memory") != std::string_view::npos;
}

void rethrow_as_error(const FailureKinds& kinds) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error("tp::infer: out of memory; run smaller batches, or free memory.", Kind::OutOfMemory);
  } catch (const c10::OutOfMemoryError& e) {
    throw error(e.what_without_backtrace(), Kind::OutOfMemory);
  } catch (const c10::Error& e) {
    throw error(e.what_without_backtrace(), kinds.otherwise);
  } catch (const PluginError& e) {
    throw error(e.what(), plugin_kind(e, kinds));
  } catch (const PluginLoadError& e) {
    throw error(e.what(), Kind::Setup);
  } catch (const ConfigError& e) {
    throw error(e.what(), Kind::Setup);
  } catch (const CheckpointError& e) {
    throw error(e.what(), Kind::Setup);
  } catch (const std::exception& e) {
    throw error(e.what(), kinds.otherwise);
  } catch (...) {
    throw Error("tp::infer: an unknown exception; this is a bug, please report it.", Kind::Internal);
  }
}

}  // namespace tp::infer::detail
