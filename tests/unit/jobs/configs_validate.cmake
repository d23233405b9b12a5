# ctest unit.jobs.configs_validate: every example pipeline in configs/ is a valid configuration.
# cmake -DSHARDMILL=BIN -DCONFIGS=configs -DWORK=DIR -P configs_validate.cmake
# The configs name paths relative to the repository root, where scripts/main-job.sh creates out/
# before any run: validate runs in WORK, which has an out/ directory, as their reports need (a
# report's directory must exist unless the run creates it).
file(GLOB configs ${CONFIGS}/*.yaml)
list(LENGTH configs n)
if(n EQUAL 0)
  message(FATAL_ERROR "no *.yaml in ${CONFIGS}")
endif()
file(MAKE_DIRECTORY ${WORK}/out)
set(failed 0)
foreach(c ${configs})
  execute_process(COMMAND ${SHARDMILL} validate ${c} WORKING_DIRECTORY ${WORK}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND out MATCHES "^[^\n]*: ok \\(job [a-z-]+\\)\n")
    message(STATUS "ok: ${c}")
  else()
    message(STATUS "FAILED (exit ${rc}): ${c}\n${err}")
    math(EXPR failed "${failed} + 1")
  endif()
endforeach()
if(failed GREATER 0)
  message(FATAL_ERROR "${failed} of ${n} configs do not validate")
endif()
message(STATUS "all ${n} configs validate")
