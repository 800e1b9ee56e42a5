#include "engine/training/batch_error.h"

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <string_view>

#include "engine/training/out_of_memory.h"
#include "tp/framework/data/dtype_name.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

bool starts_with_blank_trimmed(const std::string& line, std::string_view prefix) {
  const std::size_t first = line.find_first_not_of(" \t");
  return first != std::string::npos && std::string_view(line).substr(first).starts_with(prefix);
}

void trim_end(std::string& text, const char* characters) {
  const std::size_t last = text.find_last_not_of(characters);
  text.erase(last == std::string::npos ? 0 : last + 1);
}

// "... . In the loss's forward of training step 1 (...), which received outputs: ...; targets: ...
// Check ...": what rethrow_batch_error appends.
std::string context_text(const BatchFailure& where) {
  std::string received;
  for (const FieldGroup& group : where.groups)
    received += (received.empty() ? "" : "; ") + std::string(group.role) + ": " + describe_fields(*group.fields);
  return ". In the " + where.role + "'s " + where.call + " of " + where.phase + ", which received " + received +
         ". Check that these names, dtypes and shapes are what the " + where.role + " expects: the keys of " +
         where.table + " name the fields it reads, and `host plugins check DATASET.so` lists a dataset's fields.";
}

}  // namespace

std::string describe_fields(const NamedTensors& fields) {
  std::string text;
  for (const auto& [name, tensor] : fields) {
    text += (text.empty() ? "" : ", ") + name + " ";
    text += tensor.defined() ? dtype_name(tensor.scalar_type()) + c10::str(tensor.sizes()) : std::string("(undefined)");
  }
  return text.empty() ? "(none)" : text;
}

std::string without_backtrace(const std::string& message) {
  std::string out;
  std::size_t begin = 0;
  while (begin < message.size()) {
    const std::size_t end = std::min(message.find('\n', begin), message.size());
    const std::string line = message.substr(begin, end - begin);
    begin = end + 1;
    // LibTorch's c10::Error::what() ends with this header and one "frame #N:" line per frame.
    if (starts_with_blank_trimmed(line, "Exception raised from ")) break;
    if (starts_with_blank_trimmed(line, "frame #")) continue;
    out += (out.empty() ? "" : "\n") + line;
  }
  trim_end(out, " \t\r\n");
  return out;
}

void rethrow_batch_error(const std::exception_ptr& error, const BatchFailure& where) {
  // train.on_oom acts on the error as it came (and its report names the phase and batch size).
  if (is_out_of_memory(error)) std::rethrow_exception(error);
  std::string message;
  int status = 7;  // TP_ERR_INTERNAL: a failure on the host's side of the call
  try {
    std::rethrow_exception(error);
  } catch (const PluginError& e) {
    message = without_backtrace(e.what());
    status = e.status();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    message = "the " + where.role + " component '" + where.component + "' failed in " + where.call + ": " +
              without_backtrace(e.what_without_backtrace());
  } catch (const std::exception& e) {
    message = "the " + where.role + " component '" + where.component + "' failed in " + where.call + ": " +
              without_backtrace(e.what());
  } catch (...) {
    throw;
  }
  trim_end(message, " .");
  throw PluginError(where.component, where.call, message + context_text(where), status);
}

}  // namespace tp
