# The fused CUDA ops (framework/src/ops: torchhost::bn_act_forward / bn_act_backward, reached by
# plugins through plugin_api/include/tp/cpp/fused_norm.h), built where a CUDA LibTorch and a CUDA
# compiler are found; they need no nvJPEG, so they do not wait for the GPU decoder's conditions.
# TP_FUSED_OPS: AUTO (that), ON (required), OFF. Sets TP_FUSED_OPS_BUILT and, when the GPU decoder
# did not already, enables the CUDA language here, at the top (the host links the kernels), with
# the decoder's architectures (TP_CUDA_ARCHITECTURES). Without them the SDK keeps the unfused ops.
set(TP_FUSED_OPS AUTO CACHE STRING "the fused CUDA normalisation ops (AUTO, ON, OFF)")
set_property(CACHE TP_FUSED_OPS PROPERTY STRINGS AUTO ON OFF)
set(TP_FUSED_OPS_BUILT OFF)
set(_tp_fused_missing "")
if(TP_FUSED_OPS STREQUAL "OFF")
  set(_tp_fused_missing "TP_FUSED_OPS=OFF")
elseif(NOT TP_TORCH_DEVICE_BUILD EQUAL 2)
  set(_tp_fused_missing "a CUDA LibTorch (this one is a CPU build)")
elseif(NOT CMAKE_CUDA_COMPILER_LOADED)
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(_tp_fused_missing "a CUDA compiler (nvcc)")
  endif()
endif()
if(_tp_fused_missing)
  if(TP_FUSED_OPS STREQUAL "ON")
    message(FATAL_ERROR "torchhost: TP_FUSED_OPS=ON, but this configure lacks ${_tp_fused_missing}.")
  endif()
  message(STATUS "torchhost: fused CUDA ops: not built, this configure lacks ${_tp_fused_missing}")
else()
  if(NOT CMAKE_CUDA_COMPILER_LOADED)
    # As cmake/TorchhostGpuDecode.cmake: Hopper's code and PTX for every GPU from Ampere on.
    set(TP_CUDA_ARCHITECTURES "80-virtual;90-real" CACHE STRING "the CUDA kernels' architectures")
    enable_language(CUDA)
    if(TP_CCACHE)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${_tp_ccache})
    endif()
  endif()
  set(TP_FUSED_OPS_BUILT ON)
  message(STATUS "torchhost: fused CUDA ops: CUDA ${CMAKE_CUDA_COMPILER_VERSION} for ${TP_CUDA_ARCHITECTURES}")
endif()
