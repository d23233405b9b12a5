/* Unit tests for engine/stats/stats_pyramid.c (SPEC §5.9): sm_level_reduce against a reference
 * written here from the rule alone (each block's members visited in C order, their float32 values
 * summed in double from 0, divided by the count in double and rounded once: (float), or
 * nearbyint in the default mode for integers), for every halving pattern on an
 * odd-shaped box (edge blocks of 1, 2 and 4 members), the row-kernel types and the element-wise
 * ones, a parent cut into slabs of output planes, and `nearest`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/stats.h>

#define PZ 7
#define PY 9
#define PX 13

static double value_at(size_t i)
{
    /* spread over the types' ranges, with halves that exercise the rounding */
    return (double)((i * 7919u) % 4001u) / 2.0;
}

static void put(enum sm_dtype dt, uint8_t *p, double v)
{
    switch (dt) {
    case SM_DT_UINT8: {
        const uint8_t x = (uint8_t)((unsigned)v % 256u);
        memcpy(p, &x, 1);
        break;
    }
    case SM_DT_UINT16: {
        const uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case SM_DT_INT32: {
        const int32_t x = (int32_t)v - 1000;
        memcpy(p, &x, 4);
        break;
    }
    case SM_DT_FLOAT64: {
        const double x = v * 1.25 - 700.0;
        memcpy(p, &x, 8);
        break;
    }
    default: {
        const float x = (float)(v * 0.75 - 300.0);
        memcpy(p, &x, 4);
        break;
    }
    }
}

static double get_f32(enum sm_dtype dt, const uint8_t *p)
{
    switch (dt) {
    case SM_DT_UINT8:
        return (double)(float)p[0];
    case SM_DT_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return (double)(float)x;
    }
    case SM_DT_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        return (double)(float)x;
    }
    case SM_DT_FLOAT64: {
        double x;
        memcpy(&x, p, 8);
        return (double)(float)x;
    }
    default: {
        float x;
        memcpy(&x, p, 4);
        return (double)x;
    }
    }
}

/* The rule's value of one block mean, rounded once to dt, as bytes in want. */
static void reference(enum sm_dtype dt, double d, uint8_t *want)
{
    if (dt == SM_DT_FLOAT32) {
        const float x = (float)d;
        memcpy(want, &x, 4);
    } else if (dt == SM_DT_FLOAT64) {
        memcpy(want, &d, 8);
    } else {
        const double r = nearbyint(d);
        if (dt == SM_DT_UINT8) {
            const uint8_t x = (uint8_t)r;
            memcpy(want, &x, 1);
        } else if (dt == SM_DT_UINT16) {
            const uint16_t x = (uint16_t)r;
            memcpy(want, &x, 2);
        } else {
            const int32_t x = (int32_t)r;
            memcpy(want, &x, 4);
        }
    }
}

static void check(enum sm_dtype dt, const uint64_t *bk, bool nearest, uint64_t slab)
{
    const size_t e = sm_dtype_size(dt);
    const uint64_t ps[3] = {PZ, PY, PX};
    uint64_t os[3];
    for (unsigned d = 0; d < 3; d++) {
        os[d] = (ps[d] + bk[d] - 1) / bk[d];
    }
    uint8_t *parent = calloc(PZ * PY * PX, e);
    uint8_t *got = calloc(os[0] * os[1] * os[2], e);
    assert_non_null(parent);
    assert_non_null(got);
    for (size_t i = 0; i < PZ * PY * PX; i++) {
        put(dt, parent + i * e, value_at(i));
    }
    const struct sm_level_reduce r = {dt, {bk[0], bk[1], bk[2]}, nearest};
    for (uint64_t z0 = 0; z0 < os[0]; z0 += slab) { /* the parent cut into slabs of planes */
        const uint64_t nz = os[0] - z0 < slab ? os[0] - z0 : slab;
        const uint64_t first = bk[0] * z0;
        const uint64_t sp[3] = {PZ - first < bk[0] * nz ? PZ - first : bk[0] * nz, PY, PX};
        sm_level_reduce(&r, parent + first * PY * PX * e, sp, os, z0, nz, got);
    }
    for (uint64_t z = 0; z < os[0]; z++) {
        for (uint64_t y = 0; y < os[1]; y++) {
            for (uint64_t x = 0; x < os[2]; x++) {
                uint8_t want[8] = {0};
                const uint64_t q[3] = {z, y, x};
                uint64_t lo[3], hi[3];
                for (unsigned d = 0; d < 3; d++) {
                    lo[d] = q[d] * bk[d];
                    hi[d] = lo[d] + bk[d] < ps[d] ? lo[d] + bk[d] : ps[d];
                }
                if (nearest) {
                    memcpy(want, parent + ((lo[0] * PY + lo[1]) * PX + lo[2]) * e, e);
                } else {
                    double s = 0.0;
                    unsigned n = 0;
                    for (uint64_t a = lo[0]; a < hi[0]; a++) {
                        for (uint64_t b = lo[1]; b < hi[1]; b++) {
                            for (uint64_t c = lo[2]; c < hi[2]; c++) {
                                s += get_f32(dt, parent + ((a * PY + b) * PX + c) * e);
                                n++;
                            }
                        }
                    }
                    reference(dt, s / (double)n, want);
                }
                const uint8_t *g = got + ((z * os[1] + y) * os[2] + x) * e;
                if (memcmp(g, want, e) != 0) {
                    fail_msg("%s block %llux%llux%llu at (%llu, %llu, %llu) differs",
                             sm_dtype_name(dt), (unsigned long long)bk[0],
                             (unsigned long long)bk[1], (unsigned long long)bk[2],
                             (unsigned long long)z, (unsigned long long)y, (unsigned long long)x);
                }
            }
        }
    }
    free(parent);
    free(got);
}

static const enum sm_dtype types[] = {SM_DT_FLOAT32, SM_DT_UINT8, SM_DT_UINT16, SM_DT_INT32,
                                      SM_DT_FLOAT64};

static void mean_every_halving_and_type(void **state)
{
    (void)state;
    for (unsigned m = 1; m < 8; m++) { /* which of z, y, x the level halves */
        const uint64_t bk[3] = {(m & 4) ? 2 : 1, (m & 2) ? 2 : 1, (m & 1) ? 2 : 1};
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
            check(types[t], bk, false, 64);
            check(types[t], bk, false, 1); /* one output plane per slab */
        }
    }
}

static void nearest_takes_the_first_member(void **state)
{
    (void)state;
    const uint64_t all[3] = {2, 2, 2}, yx[3] = {1, 2, 2};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        check(types[t], all, true, 2);
        check(types[t], yx, true, 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mean_every_halving_and_type),
        cmocka_unit_test(nearest_takes_the_first_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
