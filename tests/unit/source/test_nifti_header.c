/* Unit tests for engine/source/source_nifti_hdr.c: the NIfTI-1 header parser (issue 10). Headers
 * are built field by field at the offsets of the NIfTI-1 standard (nifti1.h), little- and
 * big-endian: shape in C order, dtype, pixdim and [z, y, x] spacing, units, scl_slope/scl_inter
 * (NaN and 0 unscaled, (1, 0) unscaled, infinities refused), sform/qform origin, and every refusal:
 * short buffer, sizeof_hdr, magic (and "ni1"), dim[0], dims < 1, a dim product that overflows 64
 * bits, unsupported datatypes, vox_offset below 348, fractional, NaN or huge. */
#include "shardmill/sm_config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "source_nifti_int.h"

struct hb {
    uint8_t b[352];
    bool be;
};

static void put16(struct hb *h, size_t off, int v)
{
    uint16_t u = (uint16_t)v;
    h->b[off + (h->be ? 1 : 0)] = (uint8_t)(u & 0xff);
    h->b[off + (h->be ? 0 : 1)] = (uint8_t)(u >> 8);
}

static void put32(struct hb *h, size_t off, uint32_t u)
{
    for (int i = 0; i < 4; i++) {
        h->b[off + (size_t)(h->be ? 3 - i : i)] = (uint8_t)(u >> (8 * i));
    }
}

static void putf(struct hb *h, size_t off, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(h, off, u);
}

/* A valid 3-D int16 header: dim x=5, y=4, z=3, pixdim (0.8, 0.9, 1.5) mm, vox_offset 352. */
static void make(struct hb *h, bool be)
{
    memset(h, 0, sizeof(*h));
    h->be = be;
    put32(h, 0, 348);
    put16(h, 40, 3);
    put16(h, 42, 5);
    put16(h, 44, 4);
    put16(h, 46, 3);
    for (int i = 4; i <= 7; i++) {
        put16(h, 40 + 2 * (size_t)i, 1);
    }
    put16(h, 70, 4); /* int16 */
    put16(h, 72, 16);
    putf(h, 76, 1.0f);
    putf(h, 80, 0.8f);
    putf(h, 84, 0.9f);
    putf(h, 88, 1.5f);
    putf(h, 108, 352.0f);
    h->b[123] = 2 | 8; /* mm, s */
    memcpy(h->b + 344, "n+1", 4);
}

static sm_status parse(const struct hb *h, struct sm_nifti_hdr *out, struct sm_err *err)
{
    sm_err_clear(err);
    return sm_nifti_parse_header(h->b, sizeof(h->b), out, err);
}

static void expect_refused(const struct hb *h, const char *field, const char *what)
{
    struct sm_nifti_hdr n;
    struct sm_err err;
    assert_int_equal(parse(h, &n, &err), SM_E_DATA);
    assert_string_equal(err.where, field);
    if (strstr(err.what, what) == NULL) {
        fail_msg("'%s' lacks '%s'", err.what, what);
    }
}

static void test_valid_little_and_big_endian(void **state)
{
    (void)state;
    for (int be = 0; be < 2; be++) {
        struct hb h;
        make(&h, be != 0);
        struct sm_nifti_hdr n;
        struct sm_err err;
        assert_int_equal(parse(&h, &n, &err), SM_OK);
        assert_int_equal(n.swap, be != 0);
        assert_int_equal(n.dtype, SM_DT_INT16);
        assert_int_equal(n.ndim, 3);
        assert_int_equal(n.shape[0], 3); /* z */
        assert_int_equal(n.shape[1], 4); /* y */
        assert_int_equal(n.shape[2], 5); /* x */
        assert_int_equal(n.data_bytes, 3 * 4 * 5 * 2);
        assert_int_equal(n.vox_offset, 352);
        assert_true(n.pixdim[0] == (double)0.8f && n.pixdim[2] == 1.5);
        assert_true(n.spacing[0] == 1.5 && n.spacing[1] == (double)0.9f &&
                    n.spacing[2] == (double)0.8f);
        assert_string_equal(n.unit, "millimeter");
        assert_false(n.scaled);
        assert_false(n.have_origin);
    }
}

static void test_units(void **state)
{
    (void)state;
    static const struct {
        uint8_t code;
        const char *unit;
    } cases[] = {{0, NULL},         {1, "meter"},           {2, "millimeter"},
                 {3, "micrometer"}, {3 | 16, "micrometer"}, {5, NULL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hb h;
        make(&h, false);
        h.b[123] = cases[i].code;
        struct sm_nifti_hdr n;
        struct sm_err err;
        assert_int_equal(parse(&h, &n, &err), SM_OK);
        if (cases[i].unit == NULL) {
            assert_null(n.unit);
        } else {
            assert_string_equal(n.unit, cases[i].unit);
        }
    }
}

static void test_scaling(void **state)
{
    (void)state;
    static const struct {
        float slope, inter;
        bool scaled;
    } cases[] = {{2.0f, -5.0f, true}, {1.0f, 0.0f, false}, {0.0f, 7.0f, false},
                 {NAN, NAN, false},   {1.0f, 3.0f, true},  {0.5f, NAN, true}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hb h;
        make(&h, i % 2 == 1);
        putf(&h, 112, cases[i].slope);
        putf(&h, 116, cases[i].inter);
        struct sm_nifti_hdr n;
        struct sm_err err;
        assert_int_equal(parse(&h, &n, &err), SM_OK);
        assert_int_equal(n.scaled, cases[i].scaled);
    }
    struct hb h;
    make(&h, false);
    putf(&h, 112, INFINITY);
    expect_refused(&h, "scl_slope", "scl_slope is inf");
    make(&h, false);
    putf(&h, 112, 2.0f);
    putf(&h, 116, -INFINITY);
    expect_refused(&h, "scl_inter", "scl_inter is -inf");
}

static void test_origin_sform_then_qform(void **state)
{
    (void)state;
    struct hb h;
    make(&h, true);
    put16(&h, 252, 1); /* qform_code */
    putf(&h, 268, 1.0f);
    putf(&h, 272, 2.0f);
    putf(&h, 276, 3.0f);
    struct sm_nifti_hdr n;
    struct sm_err err;
    assert_int_equal(parse(&h, &n, &err), SM_OK);
    assert_true(n.have_origin);
    assert_string_equal(n.origin_from, "qform");
    assert_true(n.origin[0] == 3.0 && n.origin[1] == 2.0 && n.origin[2] == 1.0);
    put16(&h, 254, 2); /* sform_code wins */
    putf(&h, 280 + 12, -12.5f);
    putf(&h, 296 + 12, 7.25f);
    putf(&h, 312 + 12, 30.0f);
    assert_int_equal(parse(&h, &n, &err), SM_OK);
    assert_string_equal(n.origin_from, "sform");
    assert_true(n.origin[0] == 30.0 && n.origin[1] == 7.25 && n.origin[2] == -12.5);
}

static void test_trailing_axes_of_one(void **state)
{
    (void)state;
    struct hb h;
    make(&h, false);
    put16(&h, 40, 5); /* 5-D: x, y, z, 1, 1 -> 3-D */
    struct sm_nifti_hdr n;
    struct sm_err err;
    assert_int_equal(parse(&h, &n, &err), SM_OK);
    assert_int_equal(n.ndim, 3);
    put16(&h, 40, 3);
    put16(&h, 46, 1); /* z of 1 stays an axis: [1, y, x] */
    assert_int_equal(parse(&h, &n, &err), SM_OK);
    assert_int_equal(n.ndim, 3);
    assert_int_equal(n.shape[0], 1);
    put16(&h, 40, 4); /* a 4th axis of 2 is kept */
    put16(&h, 48, 2);
    putf(&h, 92, 2.5f);
    assert_int_equal(parse(&h, &n, &err), SM_OK);
    assert_int_equal(n.ndim, 4);
    assert_int_equal(n.shape[0], 2);
    assert_true(n.spacing[0] == 2.5 && n.spacing[3] == (double)0.8f);
}

static void test_refusals(void **state)
{
    (void)state;
    struct hb h;
    struct sm_nifti_hdr n;
    struct sm_err err;
    make(&h, false);
    sm_err_clear(&err);
    assert_int_equal(sm_nifti_parse_header(h.b, 347, &n, &err), SM_E_DATA);
    assert_string_equal(err.where, "sizeof_hdr");
    sm_err_clear(&err);
    assert_int_equal(sm_nifti_parse_header(NULL, 0, &n, &err), SM_E_DATA);

    make(&h, false);
    put32(&h, 0, 540); /* a NIfTI-2 header */
    expect_refused(&h, "sizeof_hdr", "sizeof_hdr is 540");
    make(&h, false);
    memcpy(h.b + 344, "n+2", 4);
    expect_refused(&h, "magic", "not a NIfTI-1 file");
    make(&h, false);
    memcpy(h.b + 344, "ni1", 4);
    expect_refused(&h, "magic", "separate .img file");
    make(&h, false);
    put16(&h, 40, 0);
    expect_refused(&h, "dim", "dim[0] is 0");
    make(&h, false);
    put16(&h, 40, 8);
    expect_refused(&h, "dim", "dim[0] is 8");
    make(&h, false);
    put16(&h, 44, -4);
    expect_refused(&h, "dim", "dim[2] is -4");
    make(&h, false);
    put16(&h, 70, 32); /* complex64 */
    expect_refused(&h, "datatype", "unsupported NIfTI datatype 32");
    make(&h, false);
    putf(&h, 108, 0.0f);
    expect_refused(&h, "vox_offset", "vox_offset 0");
    make(&h, false);
    putf(&h, 108, 352.5f);
    expect_refused(&h, "vox_offset", "vox_offset 352.5");
    make(&h, false);
    putf(&h, 108, NAN);
    expect_refused(&h, "vox_offset", "vox_offset");
    make(&h, false);
    putf(&h, 108, 1e30f);
    expect_refused(&h, "vox_offset", "vox_offset");
}

/* The defect of issue 10: 7 axes of 32767 int64 values wrap a 64-bit product. */
static void test_dim_product_overflow(void **state)
{
    (void)state;
    struct hb h;
    make(&h, false);
    put16(&h, 40, 7);
    for (int i = 1; i <= 7; i++) {
        put16(&h, 40 + 2 * (size_t)i, 32767);
    }
    put16(&h, 70, 1024); /* int64 */
    expect_refused(&h, "dim", "overflows");
    /* 2^62 bytes or more is refused too, below a wrap: 4 axes of 32767 float64 is 9.2e18 */
    make(&h, false);
    put16(&h, 40, 4);
    for (int i = 1; i <= 4; i++) {
        put16(&h, 40 + 2 * (size_t)i, 32767);
    }
    put16(&h, 70, 64);
    expect_refused(&h, "dim", "overflows");
    /* just below: 3 axes of 32767 float64 */
    put16(&h, 40, 3);
    struct sm_nifti_hdr n;
    struct sm_err err;
    assert_int_equal(parse(&h, &n, &err), SM_OK);
    assert_int_equal(n.data_bytes, (uint64_t)32767 * 32767 * 32767 * 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_little_and_big_endian),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_scaling),
        cmocka_unit_test(test_origin_sform_then_qform),
        cmocka_unit_test(test_trailing_axes_of_one),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_dim_product_overflow),
    };
    return cmocka_run_group_tests_name("nifti_header", tests, NULL, NULL);
}
