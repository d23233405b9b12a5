# Runs one libFuzzer target for ctest fuzz.<name> (tests/fuzz/CMakeLists.txt): fuzzes a fresh
# build-tree copy WORK of the seed corpus CORPUS, so the source tree never changes; a crash,
# leak, timeout or out-of-memory fails the test and leaves the input in ARTIFACTS.
# Arguments: -DEXE=<binary> -DARGS=<a|b|...> -DWORK=<dir> -DCORPUS=<dir> -DARTIFACTS=<dir>
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK} ${ARTIFACTS})
file(GLOB seeds ${CORPUS}/*)
if(seeds)
  file(COPY ${seeds} DESTINATION ${WORK})
endif()
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${EXE} ${args} ${WORK} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libFuzzer exited with ${rc}; the input is in ${ARTIFACTS} "
                      "(docs/internals/fuzzing.md: from a crash to a regression test)")
endif()
