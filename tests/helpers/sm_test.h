/* Small helpers shared by the cmocka unit tests: a seeded RNG (so random cases replay), substring
 * assertions, and scratch directories under $TMPDIR that are removed afterwards. Header-only and
 * `static inline`, so each test executable takes only what it uses. Include after <cmocka.h>. */
#ifndef SM_TESTS_HELPERS_SM_TEST_H
#define SM_TESTS_HELPERS_SM_TEST_H

#include "shardmill/sm_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- deterministic random numbers (splitmix64) ---- */

struct sm_test_rng {
    uint64_t s;
};

static inline uint64_t sm_test_rng_next(struct sm_test_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. */
static inline uint64_t sm_test_rng_below(struct sm_test_rng *r, uint64_t n)
{
    return sm_test_rng_next(r) % n;
}

static inline void sm_test_rng_bytes(struct sm_test_rng *r, void *p, size_t n)
{
    uint8_t *b = (uint8_t *)p;
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint8_t)(sm_test_rng_next(r) >> 24);
    }
}

/* ---- assertions ---- */

#define assert_contains(hay, needle)                                                               \
    do {                                                                                           \
        const char *sm_h_ = (hay);                                                                 \
        const char *sm_n_ = (needle);                                                              \
        if (strstr(sm_h_, sm_n_) == NULL) {                                                        \
            fail_msg("'%s' does not contain '%s'", sm_h_, sm_n_);                                  \
        }                                                                                          \
    } while (0)

/* Asserts a status and prints the error context when it differs. */
#define assert_status(st, expected, err)                                                           \
    do {                                                                                           \
        sm_status sm_st_ = (st);                                                                   \
        if (sm_st_ != (expected)) {                                                                \
            fail_msg("status %s, expected %s (where '%s', what '%s')", sm_status_name(sm_st_),     \
                     sm_status_name(expected), (err)->where, (err)->what);                         \
        }                                                                                          \
    } while (0)

#define assert_ok(st, err) assert_status((st), SM_OK, (err))

/* ---- scratch directories ---- */

/* Creates a fresh empty directory "<tmp>/shardmill-<tag>-XXXXXX" into buf; 0 on success. */
static inline int sm_test_tmpdir(const char *tag, char *buf, size_t cap)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') {
        base = "/tmp";
    }
    int n = snprintf(buf, cap, "%s/shardmill-%s-XXXXXX", base, tag);
    if (n < 0 || (size_t)n >= cap) {
        return -1;
    }
    return mkdtemp(buf) != NULL ? 0 : -1;
}

/* rm -rf path (no symlinks followed); 0 on success or if path does not exist. */
static inline int sm_test_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        return errno == ENOENT ? 0 : -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        return unlink(path);
    }
    DIR *d = opendir(path);
    if (d == NULL) {
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= (int)sizeof(sub)) {
            rc = -1;
            continue;
        }
        if (sm_test_rm_rf(sub) != 0) {
            rc = -1;
        }
    }
    closedir(d);
    if (rmdir(path) != 0) {
        rc = -1;
    }
    return rc;
}

/* Whether dir/name exists (stat follows symlinks). */
static inline bool sm_test_exists(const char *dir, const char *name)
{
    char p[PATH_MAX];
    struct stat sb;
    if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p)) {
        return false;
    }
    return stat(p, &sb) == 0;
}

/* mkdir -p of every parent directory of path (not path itself). */
static inline int sm_test_mkdir_parents(const char *path)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p)) {
        return -1;
    }
    for (char *c = p + 1; *c != '\0'; c++) {
        if (*c == '/') {
            *c = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                return -1;
            }
            *c = '/';
        }
    }
    return 0;
}

/* Writes a file (creating parent directories) outside any store; 0 on success. */
static inline int sm_test_write_file(const char *path, const void *data, size_t n)
{
    if (sm_test_mkdir_parents(path) != 0) {
        return -1;
    }
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    size_t w = n == 0 ? 0 : fwrite(data, 1, n, f);
    int rc = fclose(f);
    return (w == n && rc == 0) ? 0 : -1;
}

/* Number of directory entries (without . and ..) whose name contains `needle` ("" = all). */
static inline int sm_test_count_entries(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            strstr(e->d_name, needle) != NULL) {
            n++;
        }
    }
    closedir(d);
    return n;
}

#endif
