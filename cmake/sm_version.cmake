# Generates sm_version.h with the version and git commit, for provenance (SPEC §6, §7). The commit
# is read at build time, not only at configure time: the sm_version target runs
# cmake/sm_version_gen.cmake on every build (the header changes only when the commit does), so an
# incremental build after a new commit reports that commit. Every target that compiles against
# the header depends on sm_version (engine/CMakeLists.txt, jobs/, tests/headers/).
find_package(Git QUIET)
set(SM_VERSION_HEADER ${CMAKE_CURRENT_BINARY_DIR}/generated/shardmill/sm_version.h)
set(sm_version_args -DSM_SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR} -DSM_VERSION=${PROJECT_VERSION}
    -DSM_OUT=${SM_VERSION_HEADER} -DSM_TEMPLATE=${CMAKE_CURRENT_SOURCE_DIR}/cmake/sm_version.h.in
    -DGIT_EXECUTABLE=${GIT_EXECUTABLE})
# once now, so the header exists for what configure-time code looks at (tests/headers)
execute_process(COMMAND ${CMAKE_COMMAND} ${sm_version_args}
                        -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/sm_version_gen.cmake)
add_custom_target(sm_version ALL
                  COMMAND ${CMAKE_COMMAND} ${sm_version_args}
                          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/sm_version_gen.cmake
                  BYPRODUCTS ${SM_VERSION_HEADER}
                  COMMENT "" VERBATIM)
