# Finds the three OpenCV modules torchhost uses (core, imgproc, imgcodecs) and defines the same
# imported targets OpenCV's own package config does (opencv_core, ...).
# Why not find_package(OpenCV) alone: on Debian its config file ships only in the libopencv-dev
# meta package, which pulls ~150 packages (Qt, VTK, MPI); the per-module -dev packages are enough.
find_package(OpenCV QUIET CONFIG COMPONENTS core imgproc imgcodecs)
if(OpenCV_FOUND)
  return()
endif()
find_path(TP_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
foreach(_module core imgproc imgcodecs)
  find_library(TP_OPENCV_${_module}_LIBRARY opencv_${_module} REQUIRED)
  if(NOT TARGET opencv_${_module})
    add_library(opencv_${_module} SHARED IMPORTED)
    set_target_properties(opencv_${_module} PROPERTIES
      IMPORTED_LOCATION "${TP_OPENCV_${_module}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${TP_OPENCV_INCLUDE_DIR}")
  endif()
endforeach()
set_property(TARGET opencv_imgproc APPEND PROPERTY INTERFACE_LINK_LIBRARIES opencv_core)
set_property(TARGET opencv_imgcodecs APPEND PROPERTY INTERFACE_LINK_LIBRARIES opencv_imgproc)
message(STATUS "torchhost: OpenCV modules from ${TP_OPENCV_INCLUDE_DIR}")
