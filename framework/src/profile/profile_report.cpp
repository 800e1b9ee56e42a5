#include "tp/framework/profile/profile_report.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "tp/framework/monitor/history.h"

namespace tp {
namespace {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string shape_json(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

/// {"mean":..,"p50":..,...} of `s` divided by `divisor` (1 per batch, batch size per sample).
std::string stats_json(const LatencyStats& s, double divisor) {
  auto n = [&](double v) { return format_number(v / divisor); };
  return "{\"mean\":" + n(s.mean_ms) + ",\"p50\":" + n(s.p50_ms) + ",\"p90\":" + n(s.p90_ms) + ",\"p99\":" +
         n(s.p99_ms) + ",\"min\":" + n(s.min_ms) + ",\"max\":" + n(s.max_ms) + "}";
}

std::string printf_string(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, args...);
  return buffer;
}

}  // namespace

std::string si_number(double value) {
  static constexpr const char* kSuffix[] = {"", " k", " M", " G", " T", " P"};
  int i = 0;
  while (std::fabs(value) >= 1000.0 && i < 5) {
    value /= 1000.0;
    ++i;
  }
  return printf_string("%.3g%s", value, kSuffix[i]);
}

std::string profile_json(const ModelProfile& p) {
  const double batch = static_cast<double>(p.batch_size);
  std::string out = "{\"model\":" + json_string(p.model) + ",\"batch_size\":" + std::to_string(p.batch_size) +
                    ",\"input_source\":" + json_string(p.input_source) + ",\"inputs\":{";
  for (std::size_t i = 0; i < p.inputs.size(); ++i)
    out += (i ? "," : "") + json_string(p.inputs[i].first) + ":" + shape_json(p.inputs[i].second);
  out += "},\"parameters\":{\"total\":" + std::to_string(p.size.parameters) +
         ",\"trainable\":" + std::to_string(p.size.trainable) +
         ",\"buffer_elements\":" + std::to_string(p.size.buffer_elements) + "}";
  out += ",\"size_bytes\":" + std::to_string(p.size.bytes) + ",\"size_mb\":" + format_number(double(p.size.bytes) / 1e6);
  out += ",\"checkpoint_bytes\":" + std::to_string(p.checkpoint_bytes) +
         ",\"checkpoint_mb\":" + format_number(double(p.checkpoint_bytes) / 1e6);
  out += ",\"flops\":{\"per_sample\":" + format_number(p.flops_per_sample()) +
         ",\"per_batch\":" + std::to_string(p.flops_per_batch) + "}";
  out += ",\"macs\":{\"per_sample\":" + format_number(p.macs_per_sample()) +
         ",\"per_batch\":" + format_number(p.macs_per_batch()) + "}";
  out += ",\"flops_by_op\":[";
  for (std::size_t i = 0; i < p.flops_by_op.size(); ++i)
    out += std::string(i ? "," : "") + "{\"op\":" + json_string(p.flops_by_op[i].op) +
           ",\"calls\":" + std::to_string(p.flops_by_op[i].calls) + ",\"flops\":" + std::to_string(p.flops_by_op[i].flops) + "}";
  out += "],\"latency\":[";
  for (std::size_t i = 0; i < p.latency.size(); ++i) {
    const LatencyEntry& e = p.latency[i];
    out += std::string(i ? "," : "") + "{\"device\":" + json_string(e.device) + ",\"precision\":" + json_string(e.precision);
    if (!e.error.empty()) {
      out += ",\"error\":" + json_string(e.error) + "}";
      continue;
    }
    out += ",\"iterations\":" + std::to_string(e.batch.iterations) + ",\"batch_ms\":" + stats_json(e.batch, 1.0) +
           ",\"sample_ms\":" + stats_json(e.batch, batch) + ",\"samples_per_s\":" + format_number(e.samples_per_s) +
           ",\"peak_memory_mb\":" + format_number(e.peak_memory_mb) + "}";
  }
  return out + "]}\n";
}

std::string profile_table(const ModelProfile& p) {
  std::string out = "model      " + p.model + "\n";
  out += "inputs     ";
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    std::string shape;
    for (std::size_t d = 0; d < p.inputs[i].second.size(); ++d) shape += (d ? "x" : "") + std::to_string(p.inputs[i].second[d]);
    out += (i ? ", " : "") + p.inputs[i].first + " " + shape;
  }
  out += " (batch " + std::to_string(p.batch_size) + ", from the " + p.input_source + ")\n";
  out += printf_string("parameters %lld (%lld trainable), %s\n", static_cast<long long>(p.size.parameters),
                       static_cast<long long>(p.size.trainable), si_number(double(p.size.parameters)).c_str());
  out += printf_string("size       %.2f MB parameters + buffers; checkpoint on disk %.2f MB (model only)\n",
                       double(p.size.bytes) / 1e6, double(p.checkpoint_bytes) / 1e6);
  out += "FLOPs      " + si_number(p.flops_per_sample()) + " per sample, " + si_number(double(p.flops_per_batch)) +
         " per batch (MACs " + si_number(p.macs_per_sample()) + " / " + si_number(p.macs_per_batch()) + ")\n";
  for (const OpFlops& op : p.flops_by_op)
    out += printf_string("             %-36s %6lld calls  %s\n", op.op.c_str(), static_cast<long long>(op.calls),
                         si_number(double(op.flops)).c_str());
  out += "\nlatency (inference mode, ms)\n";
  out += printf_string("%-8s %-5s %10s %10s %10s %10s %12s %12s %10s\n", "device", "prec", "mean", "p50", "p90",
                       "p99", "ms/sample", "samples/s", "peak MB");
  for (const LatencyEntry& e : p.latency) {
    if (!e.error.empty()) {
      out += printf_string("%-8s %-5s not run: %s\n", e.device.c_str(), e.precision.c_str(), e.error.c_str());
      continue;
    }
    out += printf_string("%-8s %-5s %10.3f %10.3f %10.3f %10.3f %12.4f %12.1f %10.1f\n", e.device.c_str(),
                         e.precision.c_str(), e.batch.mean_ms, e.batch.p50_ms, e.batch.p90_ms, e.batch.p99_ms,
                         e.sample_mean_ms, e.samples_per_s, e.peak_memory_mb);
  }
  return out;
}

}  // namespace tp
