#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions run through stage() look unreachable to shellcheck
# test.sh: the one command that installs, builds and runs the whole test suite (README command 2;
# .ci/run executes exactly this). Stages:
#   deps          scripts/install-deps.sh (apt packages and npm ci, only what is missing)
#   data          scripts/fetch-data.sh (+ scripts/make-w1-input.sh): the real scans of SPEC §9
#                 in data/, so the real-data tests run instead of reporting themselves skipped
#   release       configure + build build/release (Release), ctest -j2 (every label; among them
#                 `viewer`: the OME-Zarr images in neuroglancer in headless chromium, ~3 min)
#   asan          configure + build build/asan (Debug, SM_SANITIZE=ON: ASan + UBSan), ctest -j2 of
#                 the tests that find memory errors: labels unit, bad_input, fuzz-replay and the
#                 integration tests labelled asan (one per path), less the source checks (labels
#                 static, docs) that the release stage ran; leaks on, OpenMPI noise suppressed by
#                 tests/sanitizers/lsan.supp. SM_ASAN_ALL=1 runs every label (CONTRIBUTING.md
#                 "Test tiers")
#   fuzz          configure + build build/fuzz (preset `fuzz`: clang, libFuzzer, ASan + UBSan), then
#                 ctest -L '^fuzz$' -j2: every tests/fuzz target for SM_FUZZ_SECONDS (default 30)
#                 on a copy of its seed corpus (docs/internals/fuzzing.md); the corpora's replay
#                 (fuzz_replay.*) already ran in the release and asan stages
#   checksrc      scripts/checksrc (STYLE B14 source rules)
#   format        clang-format-16 --dry-run --Werror over engine/ jobs/ tests/ bench/ *.c *.h
# Every stage runs even when an earlier one failed (except those that depend on it), so one run
# reports everything; the exit status is 1 if any stage failed. Each ctest stage ends with its ten
# slowest tests; the last line is a summary.
# Environment: SM_TEST_BUILD_JOBS (default: nproc) for the compiler's parallelism;
# SM_FUZZ_SECONDS (default 30) per fuzz target in the fuzz stage, 0 skips the stage;
# SM_ASAN_ALL=1 runs every label in the asan stage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

say() { printf 'test.sh: %s\n' "$*"; }
t_start=$SECONDS
build_jobs="${SM_TEST_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

results=()   # "name: ok|FAILED|skipped (detail)"
failed=0

# stage NAME CMD... : run CMD, record the outcome and its duration.
stage() {
    local name="$1"
    shift
    local t0=$SECONDS
    say "==> $name: $*"
    if "$@"; then
        results+=("$name ok ($((SECONDS - t0)) s)")
        say "<== $name: ok ($((SECONDS - t0)) s)"
        return 0
    else
        local rc=$?
        results+=("$name FAILED (exit $rc)")
        failed=$((failed + 1))
        say "<== $name: FAILED (exit $rc, $((SECONDS - t0)) s)"
        return 1
    fi
}
skip() {
    results+=("$1 skipped ($2)")
    say "--- $1: skipped ($2)"
}

# slowest LOG: the ten slowest tests of a ctest log (its "N/M Test #K: name ... X sec" lines).
slowest() {
    echo "ten slowest tests:"
    awk '/ Test +#[0-9]+: / && / sec$/ {
            name = $0; sub(/^.* Test +#[0-9]+: +/, "", name); sub(/ .*$/, "", name)
            printf "%10.2f s  %s\n", $(NF - 1), name
        }' "$1" | sort -gr | head -n 10
}
# ctest_run DIR LOG [ARG...]: ctest with output on failure (ARGs select tests), then the ten
# slowest tests; the summary line is kept for the final report.
ctest_run() {
    local dir="$1" log="$2" rc=0
    shift 2
    ctest --test-dir "$dir" --output-on-failure -j2 --no-tests=error --timeout 900 "$@" 2>&1 |
        tee "$log" || rc=$?
    slowest "$log"
    return "$rc"
}
# The asan stage's tests: what finds memory errors (CONTRIBUTING.md "Test tiers"). ctest -L/-LE
# take regular expressions over a test's labels; fixtures the tests require run with them.
asan_select=(-L '^(unit|bad_input|fuzz-replay|asan)$' -LE '^(static|docs)$')
if [[ "${SM_ASAN_ALL:-0}" == 1 ]]; then
    asan_select=()
fi
# ctest_asan DIR LOG: the asan selection under the sanitizers' run-time options (leaks on).
ctest_asan() {
    local -x ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
    local -x LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
    local -x UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    ctest_run "$@" "${asan_select[@]}"
}
ctest_counts() {
    local line
    line="$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" 2>/dev/null |
        tail -n 1 || true)"
    if [[ "$line" =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
        printf '%d/%d passed' "$((BASH_REMATCH[2] - BASH_REMATCH[1]))" "${BASH_REMATCH[2]}"
    else
        printf 'no ctest summary'
    fi
}

format_check() {
    command -v clang-format-16 >/dev/null 2>&1 || {
        echo "clang-format-16 not found (scripts/install-deps.sh installs it)" >&2
        return 1
    }
    local files=()
    while IFS= read -r -d '' f; do
        files+=("$f")
    done < <(find engine jobs tests bench examples \
        \( -name node_modules -o -name __pycache__ \) -prune -o \
        -type f \( -name '*.c' -o -name '*.h' \) -print0 2>/dev/null | sort -z)
    if ((${#files[@]} == 0)); then
        echo "no C sources found" >&2
        return 1
    fi
    local out rc=0
    out="$(clang-format-16 --dry-run --Werror "${files[@]}" 2>&1)" || rc=$?
    if ((rc != 0)); then
        printf '%s\n' "$out" | head -n 60
        local bad
        bad="$(printf '%s\n' "$out" | grep -oE '^[^:]+\.[ch]:[0-9]+:[0-9]+: error' |
            cut -d: -f1 | sort -u)"
        echo "clang-format-16: $(printf '%s\n' "$bad" | grep -c . || true) of ${#files[@]} file(s) need formatting:"
        printf '%s\n' "$bad" | sed 's/^/  /'
        echo "fix with: clang-format-16 -i FILE..."
        return 1
    fi
    echo "clang-format-16: ${#files[@]} file(s) formatted"
}

# --- environment for the test processes -----------------------------------------------------
if [[ -n "${CI:-}" ]]; then
    export CMOCKA_MESSAGE_OUTPUT=TAP
fi
if ((EUID == 0)); then
    # CI runs as root; OpenMPI's mpirun refuses root without these (tests/mpi).
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1 # 2-core machines, tests with more ranks
export PYTHONDONTWRITEBYTECODE=1

# --- stages ------------------------------------------------------------------------------------
if ! stage deps bash scripts/install-deps.sh; then
    say "summary: FAILED: dependencies could not be installed ($((SECONDS - t_start)) s)"
    exit 1
fi

# real_data: the scans of SPEC §9 and the arrays written from them by independent writers.
real_data() {
    bash scripts/fetch-data.sh
    if [[ -f scripts/make-w1-input.sh ]]; then
        bash scripts/make-w1-input.sh
    fi
}
stage data real_data || true

release_tests="skipped"
if stage release-configure cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release; then
    if stage release-build cmake --build build/release -j "$build_jobs"; then
        stage release-ctest ctest_run build/release build/release/test.sh-ctest.log || true
        release_tests="$(ctest_counts build/release/test.sh-ctest.log)"
    else
        skip release-ctest "build failed"
    fi
else
    skip release-build "configure failed"
    skip release-ctest "configure failed"
fi

asan_tests="skipped"
if stage asan-configure cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DSM_SANITIZE=ON; then
    if stage asan-build cmake --build build/asan -j "$build_jobs"; then
        stage asan-ctest ctest_asan build/asan build/asan/test.sh-ctest.log || true
        asan_tests="$(ctest_counts build/asan/test.sh-ctest.log)"
    else
        skip asan-ctest "build failed"
    fi
else
    skip asan-build "configure failed"
    skip asan-ctest "configure failed"
fi

# fuzz: bounded libFuzzer runs of every target (label fuzz) under ASan + UBSan.
fuzz_seconds="${SM_FUZZ_SECONDS:-30}"
fuzz_run() {
    local -x ASAN_OPTIONS="detect_leaks=1"
    local -x UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    local rc=0
    ctest --test-dir build/fuzz -L '^fuzz$' --output-on-failure -j2 --no-tests=error 2>&1 |
        tee build/fuzz/test.sh-ctest.log || rc=$?
    slowest build/fuzz/test.sh-ctest.log
    return "$rc"
}
if [[ "$fuzz_seconds" == 0 ]]; then
    skip fuzz "SM_FUZZ_SECONDS=0"
elif stage fuzz-configure cmake --preset fuzz -DSM_FUZZ_SECONDS="$fuzz_seconds"; then
    if stage fuzz-build cmake --build build/fuzz --target fuzzers -j "$build_jobs"; then
        stage fuzz fuzz_run || true
    else
        skip fuzz "build failed"
    fi
else
    skip fuzz-build "configure failed"
    skip fuzz "configure failed"
fi

stage checksrc scripts/checksrc || true
stage format format_check || true

# --- summary -----------------------------------------------------------------------------------
say "stages:"
for r in "${results[@]}"; do
    say "  $r"
done
elapsed=$((SECONDS - t_start))
if ((failed == 0)); then
    say "summary: PASSED: release ctest $release_tests, asan ctest $asan_tests, checksrc ok, format ok ($elapsed s)"
    exit 0
fi
say "summary: FAILED: $failed stage(s) failed; release ctest $release_tests, asan ctest $asan_tests ($elapsed s)"
exit 1
