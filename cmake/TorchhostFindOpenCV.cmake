# The three OpenCV modules the built-in plugins use (core, imgproc, imgcodecs), found as a plugin
# author's project finds them through the SDK (plugin_api/cmake/TorchhostOpenCV.cmake): OpenCV's
# package config when there is one, else Debian's per-module -dev packages. Where they were found
# is remembered for the installed SDK (TORCHHOST_OPENCV_INCLUDE_DIR, TORCHHOST_OPENCV_LIBRARY_DIR).
include(${PROJECT_SOURCE_DIR}/plugin_api/cmake/TorchhostOpenCV.cmake)
torchhost_find_opencv(core imgproc imgcodecs)
set_property(TARGET opencv_imgcodecs APPEND PROPERTY INTERFACE_LINK_LIBRARIES opencv_imgproc)
get_target_property(_tp_opencv_core opencv_core IMPORTED_LOCATION)
if(NOT _tp_opencv_core)
  get_target_property(_tp_opencv_core opencv_core IMPORTED_LOCATION_RELEASE)
endif()
get_filename_component(TORCHHOST_HOST_OPENCV_LIBRARY_DIR "${_tp_opencv_core}" DIRECTORY)
get_target_property(TORCHHOST_HOST_OPENCV_INCLUDE_DIR opencv_core INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "torchhost: OpenCV from ${TORCHHOST_HOST_OPENCV_INCLUDE_DIR}")
