// FlopCounter: counts the floating-point operations of the ATen ops that run on this thread while
// it is alive, from LibTorch's own records of those ops (RecordFunction callbacks with inputs and
// outputs), with the formulas of Python's torch.utils.flop_counter.FlopCounterMode.
//
// Nothing is wrapped or modified: the model (plugin or not) runs exactly as it would, functional
// ops included, and the counter only reads each op's name, argument shapes and output shape.
//
// Counted ops (FLOPs = 2 x multiply-accumulates; bias additions are not counted, as in Python):
//   aten::mm, aten::addmm                          2*m*k*n
//   aten::bmm, aten::baddbmm                       2*b*m*k*n
//   convolution (aten::convolution, _convolution, cudnn_/mkldnn_/miopen_convolution,
//     _slow_conv2d_forward, thnn_conv2d, convolution_overrideable)
//                                                  2*prod(out spatial)*prod(kernel)*N*C_out*C_in/groups
//                                                  (transposed: input spatial instead of output)
//   aten::scaled_dot_product_attention and its fused kernels
//                                                  2*b*h*s_q*s_k*(d_q + d_v)
// Each op is counted once: a counted op that runs inside another counted op (conv2d ->
// convolution -> _convolution -> mkldnn_convolution; an autocast re-dispatch of addmm) is part of
// the outermost one, which alone is counted. Everything else (elementwise, norms, softmax,
// pooling) counts zero, as in FlopCounterMode.
//
// Cost: while a counter is alive every op on this thread records its inputs (a few microseconds
// per op); count one forward pass, not a training loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tp {

/// FLOPs of one counted operator over the counter's lifetime.
struct OpFlops {
  std::string op;     ///< "aten::addmm", "aten::convolution", ...
  int64_t calls = 0;  ///< outermost calls counted
  int64_t flops = 0;
};

/// RAII scope, the C++ counterpart of `with FlopCounterMode() as m:`.
///
/// Thread tag: [main]; construct, run the ops and destroy on one thread (the callback is
/// thread-local: ops on other threads are not seen). One counter per thread at a time.
///
/// Example:
///   tp::FlopCounter counter;
///   outputs = model.forward(batch);
///   int64_t flops = counter.total_flops();   // MACs = flops / 2
class FlopCounter {
 public:
  /// Starts counting. Throws tp::Error when another FlopCounter is alive on this thread.
  FlopCounter();
  /// Stops counting (removes the callback). Never throws.
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  /// Sum over all counted ops so far.
  int64_t total_flops() const;
  /// Per operator, in order of first appearance.
  std::vector<OpFlops> by_operator() const;

  struct State; ///< the callback's tally (flop_counter.cpp)

 private:
  std::unique_ptr<State> state_;
  uint64_t handle_ = 0;
};

}  // namespace tp
