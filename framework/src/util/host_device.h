// TP_HOST_DEVICE: marks a function as both host and device code, so one arithmetic serves a CUDA
// kernel and the CPU test that holds it against a reference without a GPU
// (data/device_decode/resize_math.h, ops/norm_act_math.h). Empty where no CUDA compiler compiles.
#pragma once

#if defined(__CUDACC__)
#define TP_HOST_DEVICE __host__ __device__
#else
#define TP_HOST_DEVICE
#endif
