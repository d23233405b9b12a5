# Generates sm_version.h with the version and git commit, for provenance (SPEC §6, §7).
find_package(Git QUIET)
set(SM_GIT_COMMIT "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                  OUTPUT_VARIABLE SM_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE sm_git_rc)
  if(NOT sm_git_rc EQUAL 0)
    set(SM_GIT_COMMIT "unknown")
  endif()
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/sm_version.h.in
               ${CMAKE_CURRENT_BINARY_DIR}/generated/shardmill/sm_version.h @ONLY)
