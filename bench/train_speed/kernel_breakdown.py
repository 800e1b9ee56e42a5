"""Kernel-time breakdown of a training step by category, for the GPU benchmark (gpu_bench.py): the
same classifier for the host's Chrome traces (run.trace_steps, docs/profiling.md) and for the
Python sides' torch.profiler runs (python_sides.py). Standard library only.

    kernel_breakdown.py TRACE.json [--steps N] [--batch B]     # prints the table of one trace
    kernel_breakdown.py --self-test                            # the rules against EXAMPLES' names

A step's device events are aggregated by name ({name: [total us, count]}, `aggregate_trace` or
python_sides.py's profile), then `breakdown` sums them per category: convolution (cuDNN/cutlass
implicit-GEMM fprop, dgrad and wgrad kernels and their helpers), layout (cuDNN's NCHW <-> NHWC
conversions, a row of their own so that a layout problem shows), normalisation (native and cuDNN
BatchNorm, Inductor kernels fusing batch_norm, torchhost's fused batch_norm_act kernels), elementwise, optimizer (the fused SGD kernel),
gemm (cuBLAS, the fc layer), pooling, loss/reduction, copies (memcpy/memset: the batch copies,
on the copy stream), other. A name matches the first rule that fits; Inductor's Triton kernels
(`triton_{poi,red,per,tem}_fused_<ops>_<n>`) by the ops in their name. Unknown names go to
"other", and the five largest are listed so that the table of patterns can be completed.
"""
import argparse
import json
import re
import sys

CATEGORIES = ("convolution", "layout", "normalisation", "elementwise", "optimizer", "gemm", "pooling",
              "loss/reduction", "other")
COPIES = "copies"

# Native kernels (CUDA, cuDNN, cuBLAS, ATen), first match wins; case-insensitive regular expressions.
NATIVE_RULES = (
    ("layout", r"nhwctonchw|nchwtonhwc"),
    ("normalisation", r"batch_?norm|bn_fw|bn_bw|layer_?norm|group_?norm|welford"),
    ("optimizer", r"fusedsgd|fused_sgd|multi_tensor_apply"),
    ("pooling", r"max_?pool|avg_?pool|adaptive"),
    ("loss/reduction", r"softmax|nll_loss|cross_entropy|\breduce_kernel"),
    ("elementwise", r"elementwise|catarraybatchedcopy|fillfunctor"),
    ("convolution", r"fprop|dgrad|wgrad|implicit_convolve|implicit_gemm|cudnn|conv2d|convolution|cutlass\w*conv"
                    r"|_conv_|convkernel"),
    ("gemm", r"gemm|nvjet|cublas|cutlass|gemv|splitkreduce"),
)
NATIVE = [(category, re.compile(pattern, re.I)) for category, pattern in NATIVE_RULES]
TRITON = re.compile(r"^triton_(poi|red|per|tem|for)_(?:fused_)?(.*?)(?:_\d+)?$")
GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul"}


def classify(name):
    """The category of one device event's name (COPIES for memcpy/memset)."""
    if name.startswith(("Memcpy", "Memset")):
        return COPIES
    m = TRITON.match(name)
    if m:
        kind, ops = m.groups()
        tokens = set(ops.split("_"))
        if "batch_norm" in ops or "native_batch_norm" in ops:
            return "normalisation"
        if "convolution" in tokens:
            return "convolution"
        if tokens & GEMM_OPS:
            return "gemm"
        if "pool2d" in ops or "max_pool" in ops or "avg_pool" in ops:
            return "pooling"
        if "softmax" in ops or "nll_loss" in ops:
            return "loss/reduction"
        if "sgd" in tokens or "foreach" in tokens:
            return "optimizer"
        if kind == "poi":  # pointwise: relu, add, casts (convert_element_type, _to_copy), threshold_backward
            return "elementwise"
        if kind in ("red", "per"):
            return "loss/reduction"
        return "other"
    for category, pattern in NATIVE:
        if pattern.search(name):
            return category
    return "other"


def aggregate_trace(path):
    """({name: [total us, count]} of a Chrome trace's device events, graph launches): kernels
    (cat "kernel") and memcpy/memset ("gpu_memcpy", "gpu_memset"; their names made to start with
    Memcpy/Memset), user annotations left out; graph launches counts the cudaGraphLaunch runtime
    calls, to tell a graphed trace without kernel events from an empty one."""
    with open(path) as f:
        doc = json.load(f)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    names, launches = {}, 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), str(e.get("name", ""))
        if cat in ("cuda_runtime", "cuda_driver") and name.startswith("cudaGraphLaunch"):
            launches += 1
            continue
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        prefix = {"gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}.get(cat)
        if prefix and not name.startswith(prefix):
            name = f"{prefix} {name}"
        got = names.setdefault(name, [0.0, 0])
        got[0] += float(e.get("dur", 0))
        got[1] += 1
    return names, launches


def breakdown(names, steps, batch=None, top=5):
    """Per step: {categories: {category: ms}, kernel_ms (all but copies), copy_ms, kernels_per_step,
    images_per_s (batch / kernel time, with batch), other_top: [[name, ms], ...]} from
    {name: [total us, count]} over `steps` steps."""
    per = {c: 0.0 for c in CATEGORIES}
    copy_us = kernels = 0.0
    other = []
    for name, (us, count) in names.items():
        category = classify(name)
        if category == COPIES:
            copy_us += us
            continue
        per[category] += us
        kernels += count
        if category == "other":
            other.append([name, us / steps / 1000])
    kernel_ms = sum(per.values()) / steps / 1000
    out = {"categories": {c: us / steps / 1000 for c, us in per.items()}, "kernel_ms": kernel_ms,
           "copy_ms": copy_us / steps / 1000, "kernels_per_step": kernels / steps, "steps": steps,
           "other_top": sorted(other, key=lambda x: -x[1])[:top]}
    if batch and kernel_ms > 0:
        out["images_per_s"] = batch / (kernel_ms / 1000)
    return out


# Names as they appear on Hopper (cuDNN 9, cuBLAS, ATen, Inductor), with the category each must get:
# `kernel_breakdown.py --self-test` checks the rules against them. Add a name here with its fix.
EXAMPLES = (
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1", "convolution"),
    ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x256x64", "convolution"),
    ("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "convolution"),
    ("void cudnn::engines_precompiled::xmma_cudnn_conv_kernel<...>", "convolution"),
    ("cutlass3x_sm90_tensorop_conv2d_fprop_bf16_64x128x64", "convolution"),
    ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(...)", "convolution"),
    ("void cask__5x_cudnn::computeOffsetsKernel<false, false>(cask__5x_cudnn::ComputeOffsetsParams)", "convolution"),
    ("void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)0>", "layout"),
    ("void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>", "layout"),
    ("void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var, c10::BFloat16, float, 4>", "normalisation"),
    ("void at::native::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float, float, int, true>", "normalisation"),
    ("void at::native::batch_norm_backward_reduce_channels_last_kernel<4, c10::BFloat16, float, float>", "normalisation"),
    ("void at::native::batch_norm_backward_elemt_channels_last_kernel<4, c10::BFloat16, float, float, true>", "normalisation"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float, int, 512, true, 1>", "normalisation"),
    ("void cudnn::bn_bw_1C11_kernel_new<__nv_bfloat16, float, float2, 512, true, 1>", "normalisation"),
    ("triton_red_fused__native_batch_norm_legit_functional_convolution_0", "normalisation"),
    ("triton_poi_fused__native_batch_norm_legit_functional_relu_3", "normalisation"),
    ("triton_per_fused_native_batch_norm_backward_threshold_backward_12", "normalisation"),
    # torchhost's fused BatchNorm + [add +] ReLU (framework/src/ops/norm_act_kernels.cu, model.fused_norm)
    ("void tp::ops::(anonymous namespace)::batch_norm_act_stats<__nv_bfloat16>(...)", "normalisation"),
    ("void tp::ops::(anonymous namespace)::batch_norm_act_apply<__nv_bfloat16, 8, true>(...)", "normalisation"),
    ("void tp::ops::(anonymous namespace)::batch_norm_act_backward_reduce<__nv_bfloat16>(...)", "normalisation"),
    ("tp::ops::(anonymous namespace)::batch_norm_act_backward_finalize(...)", "normalisation"),
    ("triton_poi_fused__to_copy_add_relu_7", "elementwise"),
    ("triton_poi_fused_convert_element_type_threshold_backward_4", "elementwise"),
    ("triton_tem_fused_convolution_2", "convolution"),
    ("triton_tem_fused_addmm_5", "gemm"),
    ("triton_poi_fused_max_pool2d_with_indices_1", "pooling"),
    ("triton_per_fused__log_softmax_nll_loss_forward_9", "loss/reduction"),
    ("triton_red_fused_sum_8", "loss/reduction"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(...)", "elementwise"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(...)>", "elementwise"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)>", "elementwise"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, "
     "at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, ...>", "optimizer"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"),
    ("nvjet_tst_128x64_64x8_1x2_h_bz_TNT", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>", "gemm"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nhwc<c10::BFloat16, float>(...)", "pooling"),
    ("void at::native::(anonymous namespace)::max_pool_backward_nhwc<c10::BFloat16, float>(...)", "pooling"),
    ("void at::native::(anonymous namespace)::adaptive_average_pool_nhwc<c10::BFloat16>(...)", "pooling"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>", "loss/reduction"),
    ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>", "loss/reduction"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >", "loss/reduction"),
    ("Memcpy HtoD (Pinned -> Device)", COPIES),
    ("Memset (Device)", COPIES),
    ("some_new_kernel_nobody_knows", "other"),
)


def self_test():
    wrong = [(name, want, classify(name)) for name, want in EXAMPLES if classify(name) != want]
    for name, want, got in wrong:
        print(f"WRONG: {name[:100]}: {got}, expected {want}")
    print(f"{len(EXAMPLES) - len(wrong)}/{len(EXAMPLES)} names classified as expected")
    return 1 if wrong else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--self-test", action="store_true", help="check the rules against EXAMPLES")
    p.add_argument("--steps", type=int, default=1, help="steps the trace holds")
    p.add_argument("--batch", type=int, default=0)
    a = p.parse_args()
    if a.self_test:
        return self_test()
    if not a.trace:
        p.error("a trace, or --self-test")
    names, launches = aggregate_trace(a.trace)
    b = breakdown(names, a.steps, a.batch)
    for c in CATEGORIES:
        ms = b["categories"][c]
        print(f"{c:16} {ms:9.3f} ms  {ms / b['kernel_ms']:6.1%}" if b["kernel_ms"] else f"{c:16} {ms:9.3f} ms")
    print(f"{COPIES:16} {b['copy_ms']:9.3f} ms")
    print(f"kernels: {b['kernel_ms']:.3f} ms, {b['kernels_per_step']:.0f} per step; graph launches {launches}"
          + (f"; ceiling {b['images_per_s']:.0f} images/s" if "images_per_s" in b else ""))
    for name, ms in b["other_top"]:
        print(f"  other: {ms:.3f} ms {name[:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
