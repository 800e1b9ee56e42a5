// The two implementations of Collectives: the identity for a single process, and c10d through
// the joined DistContext (with GradSync as the gradient reducer) for data-parallel training.
#include "tp/framework/dist/collectives.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "tp/framework/dist/dist_context.h"
#include "tp/framework/dist/grad_sync.h"
#include "tp/framework/error.h"

namespace tp {
namespace {

/// Flags agree() carries: one float64 per bit, summed over ranks (> 0: some rank raised it).
constexpr int kAgreedBits = 16;

class NoReducer final : public GradientReducer {
 public:
  void before_forward(bool) override {}
  void backward(const at::Tensor& scaled_loss, bool) override { scaled_loss.backward(); }
  void after_backward() override {}
  bool sums_over_ranks() const noexcept override { return false; }
  bool overlaps_backward() const noexcept override { return false; }
  std::string describe() const override { return ""; }
};

class SingleProcess final : public Collectives {
 public:
  explicit SingleProcess(c10::Device device) : device_(device) {}
  int rank() const noexcept override { return 0; }
  int world_size() const noexcept override { return 1; }
  c10::Device device() const noexcept override { return device_; }
  std::unique_ptr<GradientReducer> gradient_reducer(const std::vector<StateTensor>&, bool) override {
    return std::make_unique<NoReducer>();
  }
  void raise_notice(const std::string&) noexcept override {}
  bool notice_raised(const std::string&) noexcept override { return false; }
  void count_local_plugin_scope(int) noexcept override {}
  bool plugin_collectives_used() const noexcept override { return false; }

 protected:
  void do_all_reduce_sum(std::vector<at::Tensor>&, const char*) override {}
  void do_broadcast(const std::vector<at::Tensor>&, const char*, int) override {}
  std::vector<at::Tensor> do_all_gather(const at::Tensor& tensor, const char*) override { return {tensor}; }
  Agreement do_agree(uint32_t flags, const at::Tensor& sums, const char*) override { return {flags, sums}; }
  std::string do_first_failure(const std::string& own_failure, const char*) override {
    return own_failure.empty() ? "" : "rank 0: " + own_failure;
  }

 private:
  c10::Device device_;
};

class Reducer final : public GradientReducer {
 public:
  Reducer(DistContext& dist, const std::vector<StateTensor>& state, bool overlap)
      : dist_(dist), sync_(dist, state, overlap) {}
  void before_forward(bool sync) override { sync_.before_forward(sync); }
  void backward(const at::Tensor& scaled_loss, bool sync) override {
    sync_.before_backward(scaled_loss, sync);
    if (!sync) {
      scaled_loss.backward();
      return;
    }
    try {
      scaled_loss.backward();
    } catch (const std::exception& e) {
      // The reducer waits for its bucket all-reduces at the end of backward; a lost rank
      // surfaces here as a transport error. fail() names the ranks that no longer answer.
      dist_.fail("all-reduce of gradient buckets during backward", e);
    }
  }
  void after_backward() override { sync_.after_backward(); }
  bool sums_over_ranks() const noexcept override { return true; }
  bool overlaps_backward() const noexcept override { return sync_.overlap(); }
  std::string describe() const override {
    std::string sizes;
    for (int64_t bytes : sync_.bucket_bytes()) sizes += (sizes.empty() ? "" : ", ") + std::to_string(bytes >> 10);
    return "data-parallel: " + std::to_string(dist_.world_size()) + " ranks, backend " + dist_.backend() + ", " +
           std::to_string(sync_.bucket_bytes().size()) + " gradient buckets (KiB, in reduction order: " + sizes +
           (sync_.overlap() ? "" : "; reduced after backward, dist.overlap = false") + ")";
  }

 private:
  DistContext& dist_;
  GradSync sync_;
};

class DataParallel final : public Collectives {
 public:
  explicit DataParallel(DistContext& dist) : dist_(dist) {}
  int rank() const noexcept override { return dist_.rank(); }
  int world_size() const noexcept override { return dist_.world_size(); }
  c10::Device device() const noexcept override { return dist_.device(); }
  std::unique_ptr<GradientReducer> gradient_reducer(const std::vector<StateTensor>& state, bool overlap) override {
    return std::make_unique<Reducer>(dist_, state, overlap);
  }
  void raise_notice(const std::string& name) noexcept override { dist_.raise_notice(name); }
  bool notice_raised(const std::string& name) noexcept override { return dist_.notice_raised(name); }
  void count_local_plugin_scope(int delta) noexcept override { dist_.count_local_plugin_scope(delta); }
  bool plugin_collectives_used() const noexcept override { return dist_.plugin_collectives_used(); }

 protected:
  void do_all_reduce_sum(std::vector<at::Tensor>& tensors, const char* what) override {
    dist_.all_reduce_sum(tensors, what);
  }
  void do_broadcast(const std::vector<at::Tensor>& tensors, const char* what, int root) override {
    dist_.broadcast(tensors, what, root);
  }
  std::vector<at::Tensor> do_all_gather(const at::Tensor& tensor, const char* what) override {
    return dist_.all_gather(tensor, what);
  }
  std::string do_first_failure(const std::string& own_failure, const char* what) override {
    return dist_.first_failure(own_failure, what);
  }
  Agreement do_agree(uint32_t flags, const at::Tensor& sums, const char* what) override {
    // One all-reduce of [bit 0 .. bit 15, sums...]; the values are read on the host, so on CUDA
    // this is a sync point (the caller's: once per optimizer step at most).
    const auto options = at::TensorOptions().dtype(at::kDouble).device(dist_.device());
    std::vector<double> bits(kAgreedBits);
    for (int b = 0; b < kAgreedBits; ++b) bits[b] = (flags >> b) & 1u ? 1.0 : 0.0;
    at::Tensor packed = at::tensor(bits, at::TensorOptions().dtype(at::kDouble)).to(options);
    if (sums.defined() && sums.numel() > 0) packed = at::cat({packed, sums.to(options).reshape({-1})});
    std::vector<at::Tensor> one{packed};
    dist_.all_reduce_sum(one, what);
    const at::Tensor host = packed.slice(0, 0, kAgreedBits).cpu();
    Agreement agreed;
    for (int b = 0; b < kAgreedBits; ++b)
      if (host[b].item<double>() > 0) agreed.flags |= 1u << b;
    agreed.sums = sums.defined() ? packed.slice(0, kAgreedBits).view(sums.sizes()) : sums;
    return agreed;
  }

 private:
  DistContext& dist_;
};

}  // namespace

void Collectives::all_reduce_sum(std::vector<at::Tensor>& tensors, const char* what) {
  ++calls_;
  do_all_reduce_sum(tensors, what);
}

void Collectives::broadcast(const std::vector<at::Tensor>& tensors, const char* what, int root) {
  ++calls_;
  do_broadcast(tensors, what, root);
}

std::vector<at::Tensor> Collectives::all_gather(const at::Tensor& tensor, const char* what) {
  ++calls_;
  return do_all_gather(tensor, what);
}

at::Tensor Collectives::all_gather_rows(const at::Tensor& rows, const char* what, std::vector<int64_t>* row_counts) {
  if (world_size() == 1) {
    if (row_counts != nullptr) *row_counts = {rows.dim() >= 1 ? rows.size(0) : 0};
    return rows;
  }
  // c10d gathers equal shapes only: first every rank's [dtype, dims, sizes...] (fixed length, so
  // a rank with other trailing sizes, or unusable rows, is reported by every rank alike instead
  // of leaving the others waiting in the second collective)...
  constexpr int64_t kMaxDims = 8;
  const bool usable = rows.dim() >= 1 && rows.dim() <= kMaxDims;
  std::vector<int64_t> header(kMaxDims + 2, 0);
  header[0] = static_cast<int64_t>(rows.scalar_type());
  header[1] = usable ? rows.dim() : -1;
  for (int64_t d = 0; usable && d < rows.dim(); ++d) header[static_cast<std::size_t>(d) + 2] = rows.size(d);
  const auto on_device = at::TensorOptions().dtype(at::kLong).device(device());
  const std::vector<at::Tensor> headers = all_gather(at::tensor(header, at::kLong).to(on_device), what);
  // Every rank judges all headers the same way, against rank 0's, so all throw the same message.
  std::vector<std::vector<int64_t>> headers_of;
  for (const at::Tensor& h : headers) {
    const at::Tensor cpu = h.cpu();
    headers_of.emplace_back(cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
  }
  const auto shape_of = [](const std::vector<int64_t>& h) {
    return std::vector<int64_t>(h.begin() + 2, h.begin() + 2 + std::max<int64_t>(h[1], 0));
  };
  const auto describe = [&](std::size_t r) {
    return c10::str(c10::IntArrayRef(shape_of(headers_of[r])), " ", static_cast<at::ScalarType>(headers_of[r][0]));
  };
  for (std::size_t r = 0; r < headers_of.size(); ++r)
    if (headers_of[r][1] < 1)
      throw RowsMismatch(c10::str(what, ": rank ", r, " has rows of no dims or more than ", kMaxDims,
                                  " to gather; rows are [N, ...] with 1 to ", kMaxDims, " dims"));
  std::vector<std::vector<int64_t>> shapes;
  int64_t longest = 0;
  for (std::size_t r = 0; r < headers_of.size(); ++r) {
    const std::vector<int64_t>& h = headers_of[r];
    const std::vector<int64_t>& first = headers_of.front();
    const bool same_tail = h[0] == first[0] && h[1] == first[1] && std::equal(h.begin() + 3, h.end(), first.begin() + 3);
    if (!same_tail)
      throw RowsMismatch(c10::str(what, ": ranks gather rows of different shapes or dtypes: rank 0 has ", describe(0),
                                  ", rank ", r, " has ", describe(r),
                                  " (only the first size, the row count, may differ)"));
    shapes.push_back(shape_of(h));
    longest = std::max(longest, h[2]);
  }
  if (row_counts != nullptr) {
    row_counts->clear();
    for (const auto& shape : shapes) row_counts->push_back(shape[0]);
  }
  // No rank has a row (no detection anywhere yet): nothing to send, and a gather of empty
  // tensors is one some c10d backends have mishandled.
  if (longest == 0) return rows;
  // ...then the rows, padded to the longest rank's count, and each rank's own rows cut back out.
  std::vector<int64_t> padded_shape = rows.sizes().vec();
  padded_shape[0] = longest;
  at::Tensor padded = at::zeros(padded_shape, rows.options().device(device()));
  padded.narrow(0, 0, rows.size(0)).copy_(rows);
  const std::vector<at::Tensor> parts = all_gather(padded, what);
  std::vector<at::Tensor> own_rows;
  for (std::size_t r = 0; r < parts.size(); ++r) own_rows.push_back(parts[r].narrow(0, 0, shapes[r][0]));
  return at::cat(own_rows).to(rows.device());
}

uint32_t Collectives::agree(uint32_t flags, const char* what) { return agree(flags, at::Tensor(), what).flags; }

Agreement Collectives::agree(uint32_t flags, const at::Tensor& sums, const char* what) {
  ++calls_;
  return do_agree(flags, sums, what);
}

std::string Collectives::first_failure(const std::string& own_failure, const char* what) {
  ++calls_;
  return do_first_failure(own_failure, what);
}

std::unique_ptr<Collectives> single_process_collectives(c10::Device device) {
  return std::make_unique<SingleProcess>(device);
}

std::unique_ptr<Collectives> data_parallel_collectives(DistContext& dist) { return std::make_unique<DataParallel>(dist); }

std::unique_ptr<Collectives> make_collectives(DistContext* dist, c10::Device device) {
  return dist ? data_parallel_collectives(*dist) : single_process_collectives(device);
}

}  // namespace tp
