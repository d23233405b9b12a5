# ctest unit.jobs.config_doc_matches: docs/CONFIG.md is generated from jobs/config_schema.c by
# `shardmill validate --markdown`; fail (with a diff) when the committed file has drifted.
# cmake -DSHARDMILL=BIN -DDOC=docs/CONFIG.md -DOUT=DIR -P config_doc_matches.cmake
execute_process(COMMAND ${SHARDMILL} validate --markdown
                OUTPUT_VARIABLE generated ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "shardmill validate --markdown failed (${rc}): ${errors}")
endif()
if(NOT EXISTS ${DOC})
  message(FATAL_ERROR "${DOC} is missing; generate it: shardmill validate --markdown > ${DOC}")
endif()
file(READ ${DOC} committed)
if(NOT committed STREQUAL generated)
  set(fresh ${OUT}/CONFIG.md.generated)
  file(WRITE ${fresh} "${generated}")
  execute_process(COMMAND diff -u ${DOC} ${fresh})
  message(FATAL_ERROR "${DOC} differs from the schema table (diff above); regenerate it:\n"
                      "  shardmill validate --markdown > docs/CONFIG.md")
endif()
message(STATUS "docs/CONFIG.md matches the schema table")
