# data.decode = "gpu" (docs/datasets.md, "Decoding on the GPU"): the framework's nvJPEG decoder and
# its one CUDA kernel (framework/src/data/device_decode), built where a CUDA LibTorch, nvJPEG
# (nvjpeg.h and libnvjpeg: the CUDA toolkit's, or the nvidia-nvjpeg wheel beside torch's other
# CUDA wheels) and a CUDA compiler are found. TP_GPU_DECODE: AUTO (that), ON (required: a missing
# piece stops the configure), OFF. Sets TP_GPU_DECODE_BUILT, TP_NVJPEG_INCLUDE_DIR and
# TP_NVJPEG_LIBRARY, and enables the CUDA language here, at the top (the host links the kernel).
set(TP_GPU_DECODE AUTO CACHE STRING "data.decode = \"gpu\": build the nvJPEG decoder (AUTO, ON, OFF)")
set_property(CACHE TP_GPU_DECODE PROPERTY STRINGS AUTO ON OFF)
set(TP_GPU_DECODE_BUILT OFF)
set(_tp_decode_missing "")
if(TP_GPU_DECODE STREQUAL "OFF")
  set(_tp_decode_missing "TP_GPU_DECODE=OFF")
elseif(NOT TP_TORCH_DEVICE_BUILD EQUAL 2)
  set(_tp_decode_missing "a CUDA LibTorch (this one is a CPU build)")
else()
  # A wheel's CUDA headers and libraries: site-packages/nvidia/<package>/{include,lib} beside torch.
  get_filename_component(_tp_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  file(GLOB _tp_wheel_include_dirs LIST_DIRECTORIES true "${_tp_site}/nvidia/*/include")
  file(GLOB _tp_wheel_lib_dirs LIST_DIRECTORIES true "${_tp_site}/nvidia/*/lib")
  find_path(TP_NVJPEG_INCLUDE_DIR nvjpeg.h
            HINTS "${CUDA_TOOLKIT_ROOT_DIR}/include" "${CUDA_TOOLKIT_ROOT_DIR}/targets/x86_64-linux/include"
                  ${_tp_wheel_include_dirs})
  # A wheel ships only the versioned name (libnvjpeg.so.13).
  find_library(TP_NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13 libnvjpeg.so.12
               HINTS "${CUDA_TOOLKIT_ROOT_DIR}/lib64" "${CUDA_TOOLKIT_ROOT_DIR}/targets/x86_64-linux/lib"
                     ${_tp_wheel_lib_dirs})
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT TP_NVJPEG_INCLUDE_DIR OR NOT TP_NVJPEG_LIBRARY)
    set(_tp_decode_missing "nvJPEG (nvjpeg.h and libnvjpeg: the CUDA toolkit's, or `pip install nvidia-nvjpeg` in torch's environment)")
  elseif(NOT CMAKE_CUDA_COMPILER)
    set(_tp_decode_missing "a CUDA compiler (nvcc)")
  endif()
endif()
if(TP_GPU_DECODE STREQUAL "OFF")
  message(STATUS "torchhost: GPU decode (data.decode = \"gpu\"): not built (TP_GPU_DECODE=OFF)")
elseif(_tp_decode_missing)
  if(TP_GPU_DECODE STREQUAL "ON")
    message(FATAL_ERROR "torchhost: TP_GPU_DECODE=ON, but this configure lacks ${_tp_decode_missing}.")
  endif()
  message(STATUS "torchhost: GPU decode (data.decode = \"gpu\"): not built, this configure lacks ${_tp_decode_missing}")
else()
  # Hopper's own code, and PTX for every GPU from Ampere on (the driver compiles it once at load).
  # A target property: LibTorch's package sets CMAKE_CUDA_ARCHITECTURES to OFF for its own flags.
  set(TP_CUDA_ARCHITECTURES "80-virtual;90-real" CACHE STRING "the GPU decoder kernel's CUDA architectures")
  enable_language(CUDA)
  if(TP_CCACHE)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_tp_ccache})
  endif()
  set(TP_GPU_DECODE_BUILT ON)
  message(STATUS "torchhost: GPU decode (data.decode = \"gpu\"): nvJPEG ${TP_NVJPEG_LIBRARY}, "
                 "CUDA ${CMAKE_CUDA_COMPILER_VERSION} for ${TP_CUDA_ARCHITECTURES}")
endif()
