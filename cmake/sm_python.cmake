# The Python tests and benchmark drivers: Debian's /usr/bin/python3 (numpy, zarr 2.13, h5py,
# tifffile, botocore) with the one helper package, tests/lib/shardmill_test, on PYTHONPATH. No
# script patches sys.path (ctest arch.no_syspath).
set(SM_PYTHON /usr/bin/python3 CACHE FILEPATH "Debian python with numpy and zarr 2.13")
set(SM_PYTHONPATH ${PROJECT_SOURCE_DIR}/tests/lib)

# sm_python_tests(): every test the calling directory adds gets PYTHONPATH=tests/lib, appended to
# its own ENVIRONMENT when the directory's CMakeLists.txt ends (a deferred call, so an early
# return() is covered). Call it at the top of each CMakeLists.txt that adds a Python test: CMake
# 3.25 sets test properties only in the directory that added the test. ctest arch.no_syspath
# fails on a Python test without it.
function(sm_python_tests)
  cmake_language(DEFER CALL sm_python_tests_env_now)
endfunction()

function(sm_python_tests_env_now)
  get_property(tests DIRECTORY PROPERTY TESTS)
  if(tests)
    set_property(TEST ${tests} APPEND PROPERTY ENVIRONMENT "PYTHONPATH=${SM_PYTHONPATH}")
  endif()
endfunction()
