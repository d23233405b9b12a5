# Warning and floating-point flags, applied per target (never globally).
# -ffp-contract=off is explicit: a fused multiply-add would break bit identity with NumPy (SPEC §5).
function(sm_target_flags target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
    -Wvla -Wcast-qual -Wundef -Wimplicit-fallthrough -ffp-contract=off -fno-fast-math)
  if(SM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(SM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
                                             -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(SM_BUILD_FUZZERS) # libFuzzer's coverage feedback reaches into the engine (tests/fuzz/)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()

# Relaxed flags for test code: cmocka macros trip -Wpedantic/-Wcast-qual, and fixed-size path
# buffers in test helpers trip -Wformat-truncation at -O2.
function(sm_test_flags target)
  target_compile_options(${target} PRIVATE -Wall -Wextra $<$<C_COMPILER_ID:GNU>:-Wno-format-truncation>
                                           -ffp-contract=off)
  if(SM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(SM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
                                             -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(SM_BUILD_FUZZERS) # libFuzzer's coverage feedback reaches into the engine (tests/fuzz/)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
