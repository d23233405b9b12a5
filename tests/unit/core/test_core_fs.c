/* Unit tests for engine/core/core_fs.c and core_syncfs.c, the one atomic-write protocol (SPEC §6)
 * the file store and the HDF5 export share: temporary names (per process and shared), a stage
 * that creates missing parents only when the create needs them and leaves nothing on failure, a
 * rename over an existing file, fsync of files and directories, and syncfs; beneath a descriptor
 * no symbolic link is followed (with openat2 and with the O_NOFOLLOW walk alone). */
#include "shardmill/sm_config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardmill/fs.h"
#include "sm_test.h"

static char dir[1024];
static int dfd = -1;

static int setup(void **state)
{
    (void)state;
    if (sm_test_tmpdir("core-fs", dir, sizeof(dir)) != 0) {
        return -1;
    }
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    return dfd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    close(dfd);
    return sm_test_rm_rf(dir);
}

static void test_fs_tmp_names(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char buf[128], want[128];
    assert_ok(sm_fs_tmp_name("c/0/1", 42, buf, sizeof(buf), &err), &err);
    snprintf(want, sizeof(want), "c/0/1.tmp.%ld.42", (long)getpid());
    assert_string_equal(buf, want);
    assert_true(sm_fs_is_tmp(buf));
    assert_true(sm_fs_is_tmp("zarr.json.tmp.1.0"));
    assert_true(sm_fs_is_tmp("0.tmp.123.4"));
    assert_false(sm_fs_is_tmp("zarr.json"));
    assert_false(sm_fs_is_tmp("0"));
    char small[8];
    assert_status(sm_fs_tmp_name("c/0/1", 42, small, sizeof(small), &err), SM_E_INTERNAL, &err);
    sm_err_clear(&err);
    assert_ok(sm_fs_shared_tmp_name("out/ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, "out/.ct.h5.shardmill-tmp");
}

/* Direct staging (O_DIRECT for the aligned head, buffered for the tail) writes exactly the bytes
 * given, for an aligned and an unaligned buffer, below and above SM_FS_DIRECT_MIN, with a tail or
 * none, fsynced or not. */
static void test_fs_stage_direct_writes_exact_bytes(void **state)
{
    (void)state;
    const size_t sizes[] = {SM_FS_DIRECT_MIN - 1, SM_FS_DIRECT_MIN, SM_FS_DIRECT_MIN + 1,
                            3 * SM_FS_DIRECT_MIN + SM_FS_DIRECT_ALIGN - 1, 4097};
    const size_t cap = 4 * SM_FS_DIRECT_MIN;
    unsigned char *mem = NULL;
    assert_int_equal(posix_memalign((void **)&mem, SM_FS_DIRECT_ALIGN, cap + 1), 0);
    for (size_t i = 0; i < cap + 1; i++) {
        mem[i] = (unsigned char)(i * 7 + (i >> 12));
    }
    struct sm_err err;
    sm_err_clear(&err);
    unsigned n = 0;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int shift = 0; shift <= 1; shift++) { /* aligned, and one byte off: buffered */
            for (int sync = 0; sync <= 1; sync++) {
                char tmp[64], p[1200];
                snprintf(tmp, sizeof(tmp), "d/o.tmp.1.%u", n++);
                const struct sm_bytes b = {mem + shift, sizes[k]};
                assert_ok(sm_fs_stage(dfd, tmp, b, sync == 1, true, &err), &err);
                snprintf(p, sizeof(p), "%s/%s", dir, tmp);
                FILE *f = fopen(p, "rb");
                assert_non_null(f);
                unsigned char *got = malloc(sizes[k] + 1);
                assert_non_null(got);
                assert_int_equal(fread(got, 1, sizes[k] + 1, f), sizes[k]);
                assert_memory_equal(got, mem + shift, sizes[k]);
                fclose(f);
                free(got);
                assert_int_equal(unlink(p), 0);
            }
        }
    }
    free(mem);
}

static void test_fs_stage_creates_parents_and_rename_replaces(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_fs_stage(dfd, "a/b/obj.tmp.1.0", sm_bytes_of("first", 5), true, false, &err),
              &err);
    assert_ok(sm_fs_rename(dfd, "a/b/obj.tmp.1.0", "a/b/obj", &err), &err);
    assert_ok(sm_fs_stage(dfd, "a/b/obj.tmp.1.1", sm_bytes_of("second!", 7), false, false, &err),
              &err);
    assert_ok(sm_fs_rename(dfd, "a/b/obj.tmp.1.1", "a/b/obj", &err), &err);
    char p[1200];
    snprintf(p, sizeof(p), "%s/a/b/obj", dir);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_size, 7);
    snprintf(p, sizeof(p), "%s/a/b", dir);
    assert_int_equal(sm_test_count_entries(p, ""), 1); /* no temporary file left */
    /* An existing staged name is never overwritten (O_EXCL): SM_E_IO, and the file survives. */
    assert_ok(sm_fs_stage(dfd, "a/b/x.tmp.1.2", sm_bytes_of("x", 1), false, false, &err), &err);
    assert_status(sm_fs_stage(dfd, "a/b/x.tmp.1.2", sm_bytes_of("yy", 2), false, false, &err),
                  SM_E_IO, &err);
    assert_string_equal(err.cause_lib, "errno");
    assert_int_equal(sm_test_count_entries(p, ".tmp."), 1);
    sm_err_clear(&err);
    /* Below a regular file no directory can be made: SM_E_IO, nothing created. */
    assert_status(sm_fs_stage(dfd, "a/b/obj/y.tmp.1.3", sm_bytes_of("y", 1), false, false, &err),
                  SM_E_IO, &err);
    sm_err_clear(&err);
    assert_status(sm_fs_rename(dfd, "a/b/missing.tmp.1.9", "a/b/missing", &err), SM_E_IO, &err);
    assert_contains(err.what, "cannot rename into place");
}

static void test_fs_fsync_and_syncfs(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_fs_mkdirs(dfd, "d/e", &err), &err);
    assert_ok(sm_fs_mkdirs(dfd, "d/e", &err), &err); /* already there: fine */
    assert_ok(sm_fs_fsync(dfd, "d/e", &err), &err);
    assert_ok(sm_fs_fsync(dfd, "", &err), &err);
    assert_status(sm_fs_fsync(dfd, "zz", &err), SM_E_IO, &err);
    assert_contains(err.what, "'zz'");
    sm_err_clear(&err);
    assert_ok(sm_fs_syncfs(dfd, &err), &err);
    assert_status(sm_fs_syncfs(-1, &err), SM_E_IO, &err);
    assert_string_equal(err.cause_lib, "errno");
    assert_contains(err.what, "syncfs");
}

static bool is_dir(const char *rel)
{
    struct stat sb;
    return fstatat(dfd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode);
}

/* mkdir -p: the deepest directory first, its missing parents only when it needs them. */
static void test_fs_mkdirs_deep_and_partial(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_fs_mkdirs(dfd, "m/a/b/c", &err), &err); /* none of it exists */
    assert_true(is_dir("m/a/b/c"));
    assert_ok(sm_fs_mkdirs(dfd, "m/a/b/d", &err), &err); /* only the last level is missing */
    assert_true(is_dir("m/a/b/d"));
    assert_ok(sm_fs_mkdirs(dfd, "m/a/x/", &err), &err); /* a trailing '/' */
    assert_true(is_dir("m/a/x"));
    assert_ok(sm_fs_mkdirs(dfd, "", &err), &err);
    /* a file in the way: an I/O error naming the path, nothing created below it */
    const int fd = openat(dfd, "m/file", O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_status(sm_fs_mkdirs(dfd, "m/file/y/z", &err), SM_E_IO, &err);
    assert_contains(err.what, "m/file/y");
    assert_string_equal(err.cause_lib, "errno");
}

/* readdir's d_type kinds (the walks of write/ use them instead of a stat per entry) */
static void test_fs_dirent_kinds(void **state)
{
    (void)state;
    assert_int_equal(sm_fs_dirent_kind(4 /* DT_DIR */), SM_FS_DIR);
    assert_int_equal(sm_fs_dirent_kind(8 /* DT_REG */), SM_FS_REG);
    assert_int_equal(sm_fs_dirent_kind(10 /* DT_LNK */), SM_FS_OTHER);
    assert_int_equal(sm_fs_dirent_kind(0 /* DT_UNKNOWN */), SM_FS_UNKNOWN);
}

/* Beneath a descriptor no symbolic link is followed (issue 19): a link at an intermediate
 * component (out/c -> elsewhere) fails stage, mkdirs, rename, fsync and unlink with the link
 * named, and nothing appears in or vanishes from `elsewhere`; a plain path (AT_FDCWD) still
 * resolves as the user gave it. */
static void beneath_refuses_links(const char *tag)
{
    struct sm_err err;
    sm_err_clear(&err);
    char out[2048], other[2048], link[2100], file[2100];
    snprintf(out, sizeof(out), "%s/out-%s", dir, tag);
    snprintf(other, sizeof(other), "%s/elsewhere-%s", dir, tag);
    assert_int_equal(mkdir(out, 0777), 0);
    assert_int_equal(mkdir(other, 0777), 0);
    snprintf(file, sizeof(file), "%s/f", other);
    assert_int_equal(sm_test_write_file(file, "keep", 4), 0);
    snprintf(link, sizeof(link), "%s/c", out);
    assert_int_equal(symlink(other, link), 0);
    const int ofd = open(out, O_RDONLY | O_DIRECTORY);
    assert_true(ofd >= 0);

    assert_status(sm_fs_stage(ofd, "c/0/1.tmp.1.1", sm_bytes_of("x", 1), true, false, &err),
                  SM_E_IO, &err);
    assert_contains(err.what, "'c' is a symbolic link");
    sm_err_clear(&err);
    assert_status(sm_fs_stage(ofd, "c/g.tmp.1.1", sm_bytes_of("x", 1), false, false, &err), SM_E_IO,
                  &err);
    sm_err_clear(&err);
    assert_status(sm_fs_mkdirs(ofd, "c/0/1", &err), SM_E_IO, &err);
    sm_err_clear(&err);
    assert_status(sm_fs_rename(ofd, "c/f", "c/g", &err), SM_E_IO, &err);
    sm_err_clear(&err);
    assert_status(sm_fs_fsync(ofd, "c", &err), SM_E_IO, &err);
    sm_err_clear(&err);
    errno = 0;
    assert_int_equal(sm_fs_unlink_beneath(ofd, "c/f", 0), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(sm_fs_open_beneath(ofd, "c", O_RDONLY, 0), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(sm_fs_opendir_beneath(ofd, "c/0", true), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(sm_fs_open_beneath(ofd, "../x", O_RDONLY, 0), -1);
    assert_int_equal(errno, EXDEV);
    assert_int_equal(sm_test_count_entries(other, ""), 1); /* only f, untouched */
    assert_int_equal(access(file, F_OK), 0);

    /* Without links the same calls work, parents made one level at a time. */
    assert_int_equal(sm_fs_opendir_beneath(ofd, "m/a", false), -1);
    assert_int_equal(errno, ENOENT);
    assert_ok(sm_fs_stage(ofd, "d/e/f.tmp.1.1", sm_bytes_of("y", 1), true, false, &err), &err);
    assert_ok(sm_fs_rename(ofd, "d/e/f.tmp.1.1", "d/e/f", &err), &err);
    assert_ok(sm_fs_fsync(ofd, "d/e", &err), &err);
    assert_ok(sm_fs_mkdirs(ofd, "d/x/y", &err), &err);
    const int fd = sm_fs_open_beneath(ofd, "d/e/f", O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sm_fs_unlink_beneath(ofd, "d/e/f", 0), 0);
    close(ofd);

    /* A plain path is the user's: its links resolve. */
    char sub[2200];
    snprintf(sub, sizeof(sub), "%s/c/sub", out);
    assert_ok(sm_fs_mkdirs(AT_FDCWD, sub, &err), &err);
    assert_int_equal(sm_test_count_entries(other, ""), 2);
}

static void test_fs_beneath_never_follows_a_link(void **state)
{
    (void)state;
    beneath_refuses_links("openat2");
    sm_fs_use_openat2(false); /* the O_NOFOLLOW walk alone */
    beneath_refuses_links("walk");
    sm_fs_use_openat2(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fs_tmp_names),
        cmocka_unit_test(test_fs_stage_creates_parents_and_rename_replaces),
        cmocka_unit_test(test_fs_stage_direct_writes_exact_bytes),
        cmocka_unit_test(test_fs_fsync_and_syncfs),
        cmocka_unit_test(test_fs_mkdirs_deep_and_partial),
        cmocka_unit_test(test_fs_dirent_kinds),
        cmocka_unit_test(test_fs_beneath_never_follows_a_link),
    };
    return cmocka_run_group_tests_name("core_fs", tests, setup, teardown);
}
