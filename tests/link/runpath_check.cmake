# cmake -DREADELF=... -DFILES="a;b;..." -P runpath_check.cmake: fails when a file's RUNPATH (or
# RPATH) holds an empty entry (a leading or trailing ':' or '::'), which the dynamic linker reads
# as the working directory: a library planted there would be loaded (cmake/TorchhostInstall.cmake).
foreach(file IN LISTS FILES)
  execute_process(COMMAND "${READELF}" -d "${file}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "runpath_check: readelf cannot read ${file}")
  endif()
  if(dynamic MATCHES "\\(R[UN]*PATH\\)[^[]*\\[([^]]*)\\]")
    set(runpath "${CMAKE_MATCH_1}")
    if(runpath MATCHES "^:|:$|::")
      message(FATAL_ERROR "runpath_check: ${file} has an empty RUNPATH entry, the working directory: [${runpath}]")
    endif()
    message(STATUS "runpath_check: ${file}: [${runpath}]")
  endif()
endforeach()
message(STATUS "runpath_check: no empty RUNPATH entry in ${FILES}")
