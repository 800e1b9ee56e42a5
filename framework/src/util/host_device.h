// TP_HOST_DEVICE: marks a function as both host and device code, so one arithmetic serves a CUDA
// kernel and the CPU test that holds it against a reference without a GPU
// (data/device_decode/resize_math.h, ops/norm_act_math.h, ops/norm_act_passes.h). Empty where no
// CUDA compiler compiles. TP_UNROLL: nvcc's `#pragma unroll` for the loop that follows (over a
// compile-time count, so that small arrays stay in registers); nothing on the host, where GCC
// would warn of an unknown pragma.
#pragma once

#if defined(__CUDACC__)
#define TP_HOST_DEVICE __host__ __device__
#define TP_UNROLL _Pragma("unroll")
#else
#define TP_HOST_DEVICE
#define TP_UNROLL
#endif
