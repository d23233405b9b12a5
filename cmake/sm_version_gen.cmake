# Script mode (cmake -P), run by the sm_version target on every build: writes sm_version.h with
# the version and the git commit of the source tree now. configure_file rewrites the header only
# when its content changes, so nothing is recompiled unless the commit moved.
# In: SM_SOURCE_DIR, SM_VERSION, SM_OUT, SM_TEMPLATE, GIT_EXECUTABLE (may be empty).
set(SM_GIT_COMMIT "unknown")
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${SM_SOURCE_DIR}
                  OUTPUT_VARIABLE sm_commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE sm_git_rc)
  if(sm_git_rc EQUAL 0 AND sm_commit)
    set(SM_GIT_COMMIT "${sm_commit}")
  endif()
endif()
set(PROJECT_VERSION "${SM_VERSION}")
configure_file(${SM_TEMPLATE} ${SM_OUT} @ONLY)
