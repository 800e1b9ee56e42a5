# torchhost_find_opencv(<module>...): imported targets opencv_<module> (opencv_core,
# opencv_imgcodecs, ...) for a plugin's `torchhost_add_plugin(... LINK opencv_core ...)`, found the
# way the host finds its own: OpenCV's package config when the system has one, else the headers
# (opencv2/core.hpp, under an opencv4/ directory as Debian installs them) and each module's library
# by name. Why not find_package(OpenCV) alone: on Debian its config file ships only in the
# libopencv-dev meta package, which pulls ~150 packages (Qt, VTK, MPI); the per-module -dev
# packages (libopencv-core-dev, libopencv-imgcodecs-dev, ...) are enough, and a plugin built with
# `LINK opencv_imgcodecs` then failed with "opencv2/imgcodecs.hpp: No such file or directory".
# Hints: TORCHHOST_OPENCV_INCLUDE_DIR and TORCHHOST_OPENCV_LIBRARY_DIR, which the installed SDK
# sets to where the host's build found OpenCV (torchhostConfig.cmake); a plugin then builds
# against the same OpenCV as the host that loads it.

function(torchhost_find_opencv)
  set(_missing)
  foreach(_module IN LISTS ARGN)
    if(NOT TARGET opencv_${_module})
      list(APPEND _missing ${_module})
    endif()
  endforeach()
  if(NOT _missing)
    return()
  endif()
  # OpenCV's own package, when installed, defines every module's target.
  find_package(OpenCV QUIET CONFIG COMPONENTS ${_missing})
  if(OpenCV_FOUND)
    return()
  endif()
  # The result has its own name: a hint set as a normal variable would make find_path skip the search.
  find_path(TORCHHOST_OPENCV_HEADERS opencv2/core.hpp HINTS "${TORCHHOST_OPENCV_INCLUDE_DIR}" PATH_SUFFIXES opencv4)
  if(NOT TORCHHOST_OPENCV_HEADERS)
    message(FATAL_ERROR "torchhost: OpenCV's headers (opencv2/core.hpp) were not found. Install OpenCV's "
                        "development files (Debian/Ubuntu: apt-get install libopencv-core-dev and the -dev "
                        "package of each module you link, e.g. libopencv-imgcodecs-dev), or set "
                        "-DTORCHHOST_OPENCV_INCLUDE_DIR=<directory holding opencv2/>.")
  endif()
  foreach(_module IN LISTS _missing)
    # core may have been made already, for a module listed before it (LINK opencv_imgcodecs opencv_core).
    if(TARGET opencv_${_module})
      continue()
    endif()
    find_library(TORCHHOST_OPENCV_${_module}_LIBRARY opencv_${_module} HINTS "${TORCHHOST_OPENCV_LIBRARY_DIR}")
    if(NOT TORCHHOST_OPENCV_${_module}_LIBRARY)
      message(FATAL_ERROR "torchhost: the OpenCV library opencv_${_module} was not found. Install its development "
                          "files (Debian/Ubuntu: libopencv-${_module}-dev, with '_' as '-'), or set "
                          "-DTORCHHOST_OPENCV_LIBRARY_DIR=<directory holding libopencv_${_module}.so>.")
    endif()
    # GLOBAL: a plugin in another directory of the project links the same target.
    add_library(opencv_${_module} SHARED IMPORTED GLOBAL)
    set_target_properties(opencv_${_module} PROPERTIES
      IMPORTED_LOCATION "${TORCHHOST_OPENCV_${_module}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${TORCHHOST_OPENCV_HEADERS}")
    # Every module builds on core; linking it keeps -z defs satisfied for inline core calls.
    if(NOT _module STREQUAL "core")
      torchhost_find_opencv(core)
      set_property(TARGET opencv_${_module} APPEND PROPERTY INTERFACE_LINK_LIBRARIES opencv_core)
    endif()
  endforeach()
endfunction()
