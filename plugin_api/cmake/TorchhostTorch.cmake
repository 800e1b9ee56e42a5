# torchhost_find_torch(): finds LibTorch for torchhost and for Tier T plugins, the CPU or the CUDA
# build, from Torch_DIR or CMAKE_PREFIX_PATH (a LibTorch zip, or a torch wheel's
# `torch.utils.cmake_prefix_path`), else, out of tree, the LibTorch the installed host was built with
# (the global property TORCHHOST_HOST_TORCH_DIR, set by torchhostConfig.cmake). When none is found
# the configure stops with one paragraph of torchhost's saying what to add to CMAKE_PREFIX_PATH,
# not CMake's generic "Could not find a package configuration file provided by Torch". Installed
# with the SDK; the torchhost tree uses it too (cmake/TorchhostFindTorch.cmake), so a plugin and
# the host find the same things the same way.
#
# After the call (a macro: the results land in the caller's scope):
#   TORCH_LIBRARIES, Torch_VERSION, ...   what LibTorch's own package sets
#   TORCHHOST_TORCH_DEVICE_BUILD          1 = CPU LibTorch, 2 = CUDA LibTorch (the build fingerprint, PLG-4)
#   TORCHHOST_TORCH_CXX_STANDARD          the C++ standard LibTorch's headers require (17 for 2.13 and
#                                         older, 20 from 2.14 on: ATen/ATen.h refuses anything older)
# The same three are kept as global properties, so a function (torchhost_add_plugin) reads them
# wherever it runs.
#
# A CUDA LibTorch's CMake package needs more than LibTorch: it enables CMake's CUDA language (so
# nvcc must be found), runs the old FindCUDA (which takes the toolkit root from nvcc's path and is
# wrong when nvcc is a wrapper script, as pip's nvidia-cuda-nvcc and ccache links are), and links
# nvrtc, which a pip wheel ships under site-packages/nvidia/*/lib with only versioned file names
# (libnvrtc.so.13) that find_library does not match. Its headers include cusparse.h, cublas_v2.h and
# nccl.h, which the wheel keeps under site-packages/nvidia/*/include. torchhost_find_torch fills
# each of these in before LibTorch's package looks (a value the user set always wins) and prints
# one line saying what it used.
include_guard(GLOBAL)

# _torchhost_torch_root(<out>): the LibTorch root (the folder with include/ and lib/) that Torch_DIR
# or an entry of CMAKE_PREFIX_PATH names, or "" when none names one.
function(_torchhost_torch_root out)
  set(_root "")
  if(Torch_DIR AND EXISTS "${Torch_DIR}/TorchConfig.cmake")
    get_filename_component(_root "${Torch_DIR}/../../.." ABSOLUTE)
  else()
    foreach(_prefix IN LISTS CMAKE_PREFIX_PATH)
      if(EXISTS "${_prefix}/Torch/TorchConfig.cmake") # a wheel's torch/share/cmake
        get_filename_component(_root "${_prefix}/../.." ABSOLUTE)
        break()
      elseif(EXISTS "${_prefix}/share/cmake/Torch/TorchConfig.cmake") # a LibTorch zip's root
        get_filename_component(_root "${_prefix}" ABSOLUTE)
        break()
      endif()
    endforeach()
  endif()
  set(${out} "${_root}" PARENT_SCOPE)
endfunction()

# _torchhost_adopt_host_torch(): when neither Torch_DIR nor CMAKE_PREFIX_PATH names a LibTorch and
# the one the host was built with still exists, makes Torch_DIR that one (a cache entry, so the
# configure log and `ccmake` show it and -DTorch_DIR=... replaces it). A Torch_DIR the user set to
# a folder without LibTorch stays, and fails with the message below.
function(_torchhost_adopt_host_torch)
  get_property(_host_torch GLOBAL PROPERTY TORCHHOST_HOST_TORCH_DIR)
  _torchhost_torch_root(_named)
  if(NOT _named AND NOT Torch_DIR AND _host_torch AND EXISTS "${_host_torch}/TorchConfig.cmake")
    set(Torch_DIR "${_host_torch}" CACHE PATH "LibTorch's CMake folder (the one the torchhost host was built with)" FORCE)
  endif()
endfunction()

# _torchhost_torch_not_found(): stops the configure with what to add to CMAKE_PREFIX_PATH.
function(_torchhost_torch_not_found)
  get_property(_host_torch GLOBAL PROPERTY TORCHHOST_HOST_TORCH_DIR)
  get_property(_sdk GLOBAL PROPERTY TORCHHOST_SDK_PREFIX)
  if(_host_torch AND EXISTS "${_host_torch}/TorchConfig.cmake")
    set(_remembered "the torchhost host was built with the LibTorch in ${_host_torch} (used when Torch_DIR is unset)")
  elseif(_host_torch)
    set(_remembered "the torchhost host was built with the LibTorch in ${_host_torch}, which is not there any more")
  else()
    set(_remembered "this build knows of no LibTorch")
  endif()
  set(_named "CMAKE_PREFIX_PATH (\"${CMAKE_PREFIX_PATH}\")")
  if(Torch_DIR)
    set(_named "Torch_DIR (\"${Torch_DIR}\") nor ${_named}")
  else()
    set(_named "Torch_DIR nor ${_named}")
  endif()
  set(_wheel "$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')")
  if(_sdk)
    set(_wheel "${_sdk};${_wheel}")
    set(_zip "${_sdk};/path/to/libtorch")
  else()
    set(_zip "/path/to/libtorch")
  endif()
  message(FATAL_ERROR
    "torchhost: no LibTorch found. A Tier T plugin (model, loss, metric, batch transform) builds "
    "against the LibTorch the host runs with (PLG-4), and ${_remembered}; neither ${_named} "
    "names one. Add that LibTorch to CMAKE_PREFIX_PATH, "
    "in quotes so that the shell does not end the command at the ';': for the torch wheel of a "
    "Python environment, -DCMAKE_PREFIX_PATH=\"${_wheel}\" (run with that environment's python3); "
    "for a LibTorch zip, -DCMAKE_PREFIX_PATH=\"${_zip}\".")
endfunction()

# _torchhost_cuda_toolkit_root(<out>): the CUDA toolkit that nvcc belongs to. nvcc reports its own
# installation (`#$ TOP=` in `nvcc -v --dryrun`), which is right for a wrapper script too.
function(_torchhost_cuda_toolkit_root out)
  if(CMAKE_CUDA_COMPILER)
    set(_nvcc "${CMAKE_CUDA_COMPILER}")
  elseif(DEFINED ENV{CUDACXX})
    set(_nvcc "$ENV{CUDACXX}")
  else()
    find_program(TORCHHOST_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin PATHS /usr/local/cuda/bin
                 DOC "CUDA's compiler, which a CUDA LibTorch's CMake package needs")
    set(_nvcc "${TORCHHOST_NVCC}")
  endif()
  if(NOT _nvcc)
    message(FATAL_ERROR
      "torchhost: the LibTorch found is a CUDA build, and its CMake package needs CUDA's compiler, nvcc, "
      "which is not on PATH, in CUDA_HOME or CUDA_PATH, nor in /usr/local/cuda. Install the CUDA toolkit "
      "whose major version LibTorch was built with (`python -c 'import torch; print(torch.version.cuda)'`; "
      "Debian's nvidia-cuda-toolkit, NVIDIA's installer, or `pip install nvidia-cuda-nvcc`), or point "
      "CMAKE_CUDA_COMPILER at its nvcc. A CPU-only machine can build against the CPU LibTorch instead.")
  endif()
  set(_probe "${CMAKE_BINARY_DIR}/CMakeFiles/torchhost_nvcc_probe.cu")
  file(WRITE "${_probe}" "")
  execute_process(COMMAND "${_nvcc}" -v --dryrun -c "${_probe}" -o "${_probe}.o"
                  OUTPUT_VARIABLE _stdout ERROR_VARIABLE _stderr RESULT_VARIABLE _rc)
  if(NOT "${_stdout}${_stderr}" MATCHES "#\\$ TOP=([^\r\n]*)")
    message(FATAL_ERROR "torchhost: could not ask ${_nvcc} where its CUDA toolkit is (`nvcc -v --dryrun` "
                        "exited ${_rc}): set CUDA_TOOLKIT_ROOT_DIR to the toolkit's folder (the one holding "
                        "bin/nvcc and include/cuda_runtime.h).")
  endif()
  get_filename_component(_top "${CMAKE_MATCH_1}" ABSOLUTE)
  set(${out} "${_top}" PARENT_SCOPE)
endfunction()

# _torchhost_prepare_cuda(<LibTorch root>): sets what a CUDA LibTorch's package needs found (see the
# top of this file) and TORCHHOST_CUDA_USED, the line that says what was used.
function(_torchhost_prepare_cuda torch_root)
  if(NOT CUDA_TOOLKIT_ROOT_DIR)
    _torchhost_cuda_toolkit_root(_toolkit)
    set(CUDA_TOOLKIT_ROOT_DIR "${_toolkit}" CACHE PATH "The CUDA toolkit LibTorch's FindCUDA uses (found by torchhost from nvcc)")
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS "${CUDA_TOOLKIT_ROOT_DIR}/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "${CUDA_TOOLKIT_ROOT_DIR}/bin/nvcc" CACHE FILEPATH "CUDA compiler")
  endif()
  # A pip wheel's CUDA libraries: site-packages/nvidia/<package>/lib beside site-packages/torch
  # (cu13 wheels: nvidia/cu13; cu12 wheels: nvidia/cuda_nvrtc, nvidia/cublas, ...).
  get_filename_component(_site "${torch_root}/.." ABSOLUTE)
  file(GLOB _wheel_lib_dirs LIST_DIRECTORIES true "${_site}/nvidia/*/lib")
  file(GLOB _wheel_include_dirs LIST_DIRECTORIES true "${_site}/nvidia/*/include")
  set(_from_wheel "")
  foreach(_lib IN ITEMS nvrtc cublas cublasLt cufft curand cusolver cusparse nvJitLink)
    find_library(CUDA_${_lib}_LIBRARY NAMES ${_lib}
                 HINTS "${CUDA_TOOLKIT_ROOT_DIR}/lib64" "${CUDA_TOOLKIT_ROOT_DIR}/lib" ${_wheel_lib_dirs} NO_DEFAULT_PATH)
    if(NOT CUDA_${_lib}_LIBRARY)
      # Only versioned names in a wheel (libnvrtc.so.13): the shortest is the library itself, not
      # a companion such as libnvrtc-builtins.so.13.0 or libnvrtc.alt.so.13.
      set(_candidates "")
      foreach(_dir IN LISTS _wheel_lib_dirs)
        file(GLOB _versioned "${_dir}/lib${_lib}.so.[0-9]*")
        list(APPEND _candidates ${_versioned})
      endforeach()
      list(SORT _candidates)
      if(_candidates)
        list(GET _candidates 0 _chosen)
        set(CUDA_${_lib}_LIBRARY "${_chosen}" CACHE FILEPATH "CUDA ${_lib} (found by torchhost in the torch wheel)" FORCE)
        set(_from_wheel "${_site}/nvidia")
      endif()
    endif()
  endforeach()
  set(TORCHHOST_CUDA_INCLUDE_DIRS "${_wheel_include_dirs}" PARENT_SCOPE)
  set(_used "CUDA toolkit ${CUDA_TOOLKIT_ROOT_DIR}")
  if(_from_wheel)
    string(APPEND _used "; the CUDA libraries and headers the wheel ships in ${_from_wheel}")
  endif()
  set(TORCHHOST_CUDA_USED "${_used}" PARENT_SCOPE)
endfunction()

# _torchhost_torch_cxx_standard(<out> <include dir>): 20 when LibTorch's ATen/ATen.h refuses
# anything older than C++20, else 17 (the SDK's floor).
function(_torchhost_torch_cxx_standard out include_dirs)
  set(_standard 17)
  foreach(_dir IN LISTS include_dirs)
    if(EXISTS "${_dir}/ATen/ATen.h")
      file(STRINGS "${_dir}/ATen/ATen.h" _check REGEX "__cplusplus < [0-9]+L")
      if(_check MATCHES "__cplusplus < 202002L")
        set(_standard 20)
      endif()
      break()
    endif()
  endforeach()
  set(${out} ${_standard} PARENT_SCOPE)
endfunction()

macro(torchhost_find_torch)
  get_property(_torchhost_found GLOBAL PROPERTY TORCHHOST_TORCH_LIBRARIES SET)
  if(_torchhost_found AND TARGET torch)
    get_property(TORCH_LIBRARIES GLOBAL PROPERTY TORCHHOST_TORCH_LIBRARIES)
    get_property(TORCHHOST_TORCH_DEVICE_BUILD GLOBAL PROPERTY TORCHHOST_TORCH_DEVICE_BUILD)
    get_property(TORCHHOST_TORCH_CXX_STANDARD GLOBAL PROPERTY TORCHHOST_TORCH_CXX_STANDARD)
  else()
    _torchhost_adopt_host_torch()
    _torchhost_torch_root(_torchhost_root)
    set(TORCHHOST_CUDA_USED "")
    set(TORCHHOST_CUDA_INCLUDE_DIRS "")
    if(_torchhost_root AND EXISTS "${_torchhost_root}/lib/libtorch_cuda.so")
      _torchhost_prepare_cuda("${_torchhost_root}")
    endif()
    find_package(Torch CONFIG QUIET)
    if(NOT Torch_FOUND)
      _torchhost_torch_not_found()
    endif()
    if(Torch_VERSION VERSION_LESS 2.0)
      message(FATAL_ERROR "torchhost needs LibTorch 2.x; found ${Torch_VERSION} at ${Torch_DIR}")
    endif()
    if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
      set(TORCHHOST_TORCH_DEVICE_BUILD 2)
      set(_torchhost_kind "CUDA ${CUDA_VERSION}")
      if(TORCHHOST_CUDA_INCLUDE_DIRS)
        set_property(TARGET torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${TORCHHOST_CUDA_INCLUDE_DIRS})
      endif()
    else()
      set(TORCHHOST_TORCH_DEVICE_BUILD 1)
      set(_torchhost_kind "CPU")
    endif()
    _torchhost_torch_cxx_standard(TORCHHOST_TORCH_CXX_STANDARD "${TORCH_INCLUDE_DIRS}")
    set_property(GLOBAL PROPERTY TORCHHOST_TORCH_LIBRARIES "${TORCH_LIBRARIES}")
    set_property(GLOBAL PROPERTY TORCHHOST_TORCH_DEVICE_BUILD ${TORCHHOST_TORCH_DEVICE_BUILD})
    set_property(GLOBAL PROPERTY TORCHHOST_TORCH_CXX_STANDARD ${TORCHHOST_TORCH_CXX_STANDARD})
    # One line for what was found. LibTorch's "library kineto not found" warning looks like a failure
    # and is harmless (a wheel links Kineto into libtorch_cpu): the line says so where it was printed.
    set(_torchhost_line "torchhost: LibTorch ${Torch_VERSION} (${_torchhost_kind}, C++${TORCHHOST_TORCH_CXX_STANDARD}) from ${Torch_DIR}")
    if(TORCHHOST_CUDA_USED)
      string(APPEND _torchhost_line "; ${TORCHHOST_CUDA_USED}")
    endif()
    if(DEFINED kineto_LIBRARY AND NOT kineto_LIBRARY)
      string(APPEND _torchhost_line "; LibTorch's 'library kineto not found' warning is harmless (Kineto is inside libtorch_cpu)")
    endif()
    message(STATUS "${_torchhost_line}")
  endif()
endmacro()
