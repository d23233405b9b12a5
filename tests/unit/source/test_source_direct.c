/* Unit tests for engine/source/source_direct.c: reads that bypass the page cache return exactly
 * the bytes a plain pread returns, for any offset and length (unaligned, across the bounce
 * buffer's chunks, up to the file's last byte), count the aligned range they fetched, refuse a
 * range past the file's end as SM_E_DATA, follow a new file behind a reused descriptor number,
 * stay buffered below `min` or with min UINT64_MAX, and fall back to buffered reads where the
 * file system refuses O_DIRECT (procfs). */
#include "shardmill/sm_config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/fs.h"

#include "source_int.h"

/* 10 MiB + 1,234 bytes: three bounce chunks and a last block the file ends inside */
#define FILE_BYTES ((size_t)(10 << 20) + 1234)

static uint8_t byte_at(uint64_t i, unsigned seed)
{
    return (uint8_t)((i * 2654435761u) >> 13 ^ seed);
}

/* A file of FILE_BYTES pattern bytes in the test's directory (a disk file system, where O_DIRECT
 * works), opened for reading and already unlinked (/proc/self/fd still reopens it). */
static int make_file(char *path, size_t cap, unsigned seed)
{
    (void)snprintf(path, cap, "source_direct_%u_%ld.bin", seed, (long)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t *b = malloc(FILE_BYTES);
    assert_non_null(b);
    for (size_t i = 0; i < FILE_BYTES; i++) {
        b[i] = byte_at(i, seed);
    }
    assert_int_equal(fwrite(b, 1, FILE_BYTES, f), FILE_BYTES);
    assert_int_equal(fclose(f), 0);
    free(b);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(unlink(path), 0); /* nothing left behind, even when a check fails */
    return fd;
}

/* Whether this file system opens fd's file with O_DIRECT (a tmpfs before Linux 6.6 does not). */
static bool direct_works(int fd)
{
    const int d = sm_fs_reopen_direct(fd);
    if (d < 0) {
        print_message("note: O_DIRECT refused here (%s): the buffered fallback is tested\n",
                      strerror(errno));
        return false;
    }
    close(d);
    return true;
}

static void check_range(struct sm_src_direct *d, int fd, uint64_t off, size_t n, unsigned seed,
                        bool direct)
{
    uint8_t *got = malloc(n + 1);
    assert_non_null(got);
    memset(got, 0xEE, n + 1);
    uint64_t fetched = 0;
    struct sm_err err = {0};
    assert_int_equal(sm_src_pread_direct(d, fd, off, got, n, &fetched, "f", &err), SM_OK);
    for (size_t i = 0; i < n; i++) {
        if (got[i] != byte_at(off + i, seed)) {
            fail_msg("byte %zu of [%llu, +%zu) is %u, not %u", i, (unsigned long long)off, n,
                     got[i], byte_at(off + i, seed));
        }
    }
    assert_int_equal(got[n], 0xEE); /* nothing past dst's n bytes */
    if (direct && n >= d->min) {
        /* the 4 KiB-aligned range around it, cut at the file's end */
        const uint64_t lo = off & ~(uint64_t)4095, hi = (off + n + 4095) & ~(uint64_t)4095;
        const uint64_t want = (hi < FILE_BYTES ? hi : FILE_BYTES) - lo;
        assert_int_equal(fetched, want);
        assert_true(d->fd >= 0);
    } else {
        assert_int_equal(fetched, n);
    }
    free(got);
}

static void ranges_read_exactly(void **state)
{
    (void)state;
    char path[128];
    const int fd = make_file(path, sizeof(path), 1);
    const bool direct = direct_works(fd);
    struct sm_src_direct d;
    sm_src_direct_init(&d, 1);
    const uint64_t chunk = SM_SRC_DIRECT_CHUNK;
    const struct {
        uint64_t off;
        size_t n;
    } r[] = {
        {0, 1},
        {0, 4096},
        {1, 4095},
        {4095, 2},
        {123, (size_t)chunk},
        {chunk - 7, (size_t)chunk + 14},
        {8, FILE_BYTES - 8},
        {0, FILE_BYTES},
        {FILE_BYTES - 1, 1},
        {FILE_BYTES - 5000, 5000},
        {2 * chunk + 17, FILE_BYTES - 2 * chunk - 17},
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        check_range(&d, fd, r[i].off, r[i].n, 1, direct);
    }
    for (int i = 0; i < 200; i++) { /* random ranges */
        const uint64_t off = (uint64_t)rand() % FILE_BYTES;
        const size_t n = 1 + (size_t)((uint64_t)rand() % (FILE_BYTES - off));
        check_range(&d, fd, off, n, 1, direct);
    }
    assert_int_equal(d.off, !direct);
    sm_src_direct_end(&d);
    close(fd);
}

static void past_the_end_is_data_error(void **state)
{
    (void)state;
    char path[128];
    const int fd = make_file(path, sizeof(path), 2);
    struct sm_src_direct d;
    sm_src_direct_init(&d, 1);
    uint8_t *b = malloc(8192);
    assert_non_null(b);
    uint64_t fetched = 0;
    struct sm_err err = {0};
    assert_int_equal(sm_src_pread_direct(&d, fd, FILE_BYTES - 100, b, 8192, &fetched, "f", &err),
                     SM_E_DATA);
    assert_non_null(strstr(err.what, "file ends at byte"));
    struct sm_err err2 = {0};
    assert_int_equal(sm_src_pread_direct(&d, fd, FILE_BYTES + 8192, b, 10, &fetched, "f", &err2),
                     SM_E_DATA);
    free(b);
    sm_src_direct_end(&d);
    close(fd);
}

static void a_reused_descriptor_is_the_new_file(void **state)
{
    (void)state;
    char a[128], b[128];
    struct sm_src_direct d;
    sm_src_direct_init(&d, 1);
    const int fa = make_file(a, sizeof(a), 3);
    const bool direct = direct_works(fa);
    check_range(&d, fa, 100, 1 << 20, 3, direct);
    close(fa);
    const int fb = make_file(b, sizeof(b), 4); /* most likely fa's number again */
    check_range(&d, fb, 100, 1 << 20, 4, direct);
    sm_src_direct_end(&d);
    close(fb);
}

static void below_min_or_off_stays_buffered(void **state)
{
    (void)state;
    char path[128];
    const int fd = make_file(path, sizeof(path), 5);
    struct sm_src_direct d;
    sm_src_direct_init(&d, 1 << 20);
    check_range(&d, fd, 5, (1 << 20) - 1, 5, false);
    assert_int_equal(d.fd, -1);
    sm_src_direct_end(&d);
    sm_src_direct_init(&d, UINT64_MAX);
    check_range(&d, fd, 5, FILE_BYTES - 5, 5, false);
    assert_int_equal(d.fd, -1);
    assert_true(d.off);
    sm_src_direct_end(&d);
    close(fd);
}

static void a_refusing_file_system_reads_buffered(void **state)
{
    (void)state;
    const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        skip();
    }
    char want[64], got[64];
    const ssize_t n = pread(fd, want, sizeof(want), 0);
    assert_true(n > 0);
    struct sm_src_direct d;
    sm_src_direct_init(&d, 1);
    uint64_t fetched = 0;
    struct sm_err err = {0};
    assert_int_equal(sm_src_pread_direct(&d, fd, 0, got, (size_t)n, &fetched, "f", &err), SM_OK);
    assert_memory_equal(got, want, (size_t)n);
    assert_int_equal(fetched, (uint64_t)n);
    assert_true(d.off); /* procfs has no O_DIRECT: buffered from now on */
    assert_int_equal(d.fd, -1);
    sm_src_direct_end(&d);
    close(fd);
}

/* input.direct_io: never and always whatever the size; auto only for files of half the memory. */
static void the_policy_follows_the_input_size(void **state)
{
    (void)state;
    const uint64_t mem = sm_fs_memory_bytes();
    assert_true(mem > 0);
    assert_int_equal(sm_src_direct_min(SM_SOURCE_DIRECT_NEVER, UINT64_MAX), UINT64_MAX);
    assert_int_equal(sm_src_direct_min(SM_SOURCE_DIRECT_ALWAYS, 1), SM_SOURCE_DIRECT_MIN);
    assert_int_equal(sm_src_direct_min(SM_SOURCE_DIRECT_AUTO, mem / 2 - 1), UINT64_MAX);
    assert_int_equal(sm_src_direct_min(SM_SOURCE_DIRECT_AUTO, mem / 2), SM_SOURCE_DIRECT_MIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ranges_read_exactly),
        cmocka_unit_test(past_the_end_is_data_error),
        cmocka_unit_test(a_reused_descriptor_is_the_new_file),
        cmocka_unit_test(below_min_or_off_stays_buffered),
        cmocka_unit_test(a_refusing_file_system_reads_buffered),
        cmocka_unit_test(the_policy_follows_the_input_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
