/* Unit tests for the raw and NIfTI-1 sources (engine/source/source_raw.c, source_nifti.c,
 * source_flat.c, source_gz.c) over files written here: values of a box (big-endian raw swapped,
 * NIfTI scl_slope/scl_inter applied), info (shape, type, the plane as the slab, NIfTI spacing, unit
 * and sform origin), the provenance of describe, and sm_source_bytes_read: exactly the box's
 * stored bytes for pread sources; for a .nii.gz the compressed bytes plan inflated, and nothing
 * more for boxes served from memory. Refusals: a raw file of the wrong size, a NIfTI pixdim of 0
 * (unless the caller gives its own spacing), a .nii.gz plan over the memory budget. */
#include "shardmill/sm_config.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "shardmill/source.h"

/* The volume: [Z, Y, X] = [3, 4, 5], value (z, y, x) = 100 * z + 10 * y + x. */
#define Z 3
#define Y 4
#define X 5
#define N (Z * Y * X)

static char dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sm_src_unit_XXXXXX");
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int remove_dir(void **state)
{
    (void)state;
    static const char *const names[] = {"v.raw", "v.nii", "v.nii.gz", "zero.nii"};
    char p[128];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    return rmdir(dir);
}

static int16_t value(uint64_t z, uint64_t y, uint64_t x)
{
    return (int16_t)(100 * z + 10 * y + x);
}

static void write_file(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(a, 1, na, f), na);
    assert_int_equal(fwrite(b, 1, nb, f), nb);
    assert_int_equal(fclose(f), 0);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

static struct sm_source *open_ok(const struct sm_source_params *p)
{
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    const sm_status st = sm_source_open(p, &s, &err);
    if (st != SM_OK) {
        fail_msg("open %s: %s: %s", p->path, err.where, err.what);
    }
    return s;
}

static const uint64_t box_off[3] = {1, 1, 2}, box_shape[3] = {2, 3, 3};
#define BOX_N (2 * 3 * 3)

static void test_raw(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/v.raw", dir);
    uint8_t be[N * 2]; /* big-endian int16 after a 7-byte header */
    for (uint64_t i = 0; i < N; i++) {
        const uint16_t v = (uint16_t)value(i / (Y * X), i / X % Y, i % X);
        be[2 * i] = (uint8_t)(v >> 8);
        be[2 * i + 1] = (uint8_t)v;
    }
    write_file(path, "header!", 7, be, sizeof(be));
    struct sm_source_params p = {.format = "raw",
                                 .path = path,
                                 .raw_dtype = SM_DT_INT16,
                                 .raw_ndim = 3,
                                 .raw_shape = {Z, Y, X},
                                 .raw_big_endian = true,
                                 .raw_header_bytes = 7};
    struct sm_source *s = open_ok(&p);
    const struct sm_source_info *in = sm_source_info(s);
    assert_string_equal(in->format, "raw");
    assert_int_equal(in->dtype, SM_DT_INT16);
    assert_int_equal(in->shape[2], X);
    assert_int_equal(in->slab[0], 1); /* a plane */
    assert_int_equal(in->slab[1], Y);
    assert_int_equal(in->slab[2], X);
    assert_int_equal(in->access, SM_SOURCE_RANDOM); /* pread: a box reads its own rows */
    assert_false(in->spacing_set);
    int16_t out[BOX_N];
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_read_box(s, 0, box_off, box_shape, out, &err), SM_OK);
    assert_int_equal(out[0], value(1, 1, 2));
    assert_int_equal(out[BOX_N - 1], value(2, 3, 4));
    assert_int_equal(sm_source_bytes_read(s), BOX_N * 2); /* exactly the box's bytes */
    assert_int_equal(sm_source_read_box(s, 1, box_off, box_shape, out, &err), SM_OK);
    assert_int_equal(sm_source_bytes_read(s), 2 * BOX_N * 2);
    json_t *d = sm_source_describe(s);
    assert_string_equal(json_string_value(json_object_get(d, "path")), path);
    assert_string_equal(json_string_value(json_object_get(d, "format")), "raw");
    assert_string_equal(json_string_value(json_object_get(d, "dtype")), "int16");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(d, "shape"), 0)), Z);
    json_t *file = json_object_get(d, "file");
    assert_int_equal(json_integer_value(json_object_get(file, "bytes")), 7 + N * 2);
    assert_int_equal(json_integer_value(json_object_get(file, "files")), 1);
    json_decref(d);
    sm_source_close(s);

    p.raw_header_bytes = 6; /* one byte too many for the volume */
    s = (struct sm_source *)&p;
    sm_err_clear(&err);
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_DATA);
    assert_null(s);
    assert_string_equal(err.where, path);
}

/* A little-endian int16 NIfTI-1 header of [Z, Y, X], pixdim (x, y, z) = (0.5, 0.25, 2) mm, an
 * sform with origin (x, y, z) = (10, 20, 30), scl_slope 2, scl_inter 1, vox_offset 352. */
static void header(uint8_t h[352], float pixdim_x)
{
    memset(h, 0, 352);
    const int32_t sizeof_hdr = 348;
    memcpy(h, &sizeof_hdr, 4);
    const int16_t dim[8] = {3, X, Y, Z, 1, 1, 1, 1}, datatype = 4, bitpix = 16, sform = 1;
    memcpy(h + 40, dim, sizeof(dim));
    memcpy(h + 70, &datatype, 2);
    memcpy(h + 72, &bitpix, 2);
    const float pixdim[4] = {1.0f, pixdim_x, 0.25f, 2.0f}, vox = 352.0f, slope = 2, inter = 1;
    memcpy(h + 76, pixdim, sizeof(pixdim));
    memcpy(h + 108, &vox, 4);
    memcpy(h + 112, &slope, 4);
    memcpy(h + 116, &inter, 4);
    h[123] = 2; /* millimeter */
    memcpy(h + 254, &sform, 2);
    const float srow_x[4] = {pixdim_x, 0, 0, 10}, srow_y[4] = {0, 0.25f, 0, 20},
                srow_z[4] = {0, 0, 2, 30};
    memcpy(h + 280, srow_x, 16);
    memcpy(h + 296, srow_y, 16);
    memcpy(h + 312, srow_z, 16);
    memcpy(h + 344, "n+1", 4);
}

static void volume_le(int16_t v[N])
{
    for (uint64_t i = 0; i < N; i++) {
        v[i] = value(i / (Y * X), i / X % Y, i % X);
    }
}

/* The box of a NIfTI source: v * 2 + 1 as float32. */
static void check_box(struct sm_source *s)
{
    float out[BOX_N];
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_read_box(s, 0, box_off, box_shape, out, &err), SM_OK);
    assert_true(out[0] == (float)(value(1, 1, 2) * 2 + 1));
    assert_true(out[BOX_N - 1] == (float)(value(2, 3, 4) * 2 + 1));
}

static void test_nii(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/v.nii", dir);
    uint8_t h[352];
    int16_t v[N];
    header(h, 0.5f);
    volume_le(v);
    write_file(path, h, sizeof(h), v, sizeof(v));
    const struct sm_source_params p = {.format = "nifti", .path = path};
    struct sm_source *s = open_ok(&p);
    const struct sm_source_info *in = sm_source_info(s);
    assert_string_equal(in->format, "nifti");
    assert_int_equal(in->dtype, SM_DT_FLOAT32); /* scaled */
    assert_int_equal(in->slab[0], 1);
    assert_int_equal(in->access, SM_SOURCE_RANDOM);
    assert_true(in->spacing_set);
    assert_true(in->spacing[0] == 2.0 && in->spacing[1] == 0.25 && in->spacing[2] == 0.5);
    assert_string_equal(in->unit, "millimeter");
    assert_true(in->origin_set);
    assert_true(in->origin[0] == 30.0 && in->origin[1] == 20.0 && in->origin[2] == 10.0);
    check_box(s);
    assert_int_equal(sm_source_bytes_read(s), BOX_N * 2); /* the stored int16 values */
    json_t *d = sm_source_describe(s);
    assert_int_equal(json_integer_value(json_object_get(d, "sform_code")), 1);
    assert_true(json_real_value(json_array_get(json_object_get(d, "pixdim"), 0)) == 0.5);
    json_t *sc = json_object_get(d, "scaling");
    assert_true(json_real_value(json_object_get(sc, "scl_slope")) == 2.0);
    assert_string_equal(json_string_value(json_object_get(sc, "stored_dtype")), "int16");
    json_decref(d);
    sm_source_close(s);
}

static void test_pixdim(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/zero.nii", dir);
    uint8_t h[352];
    int16_t v[N];
    header(h, 0.0f); /* pixdim[1] (x) is 0 */
    volume_le(v);
    write_file(path, h, sizeof(h), v, sizeof(v));
    struct sm_source_params p = {.format = "nifti", .path = path};
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_DATA);
    assert_null(s);
    assert_non_null(strstr(err.where, "zero.nii: pixdim"));
    assert_non_null(strstr(err.what, "pixdim[1]"));
    p.spacing_given = true; /* the caller's spacing replaces it */
    s = open_ok(&p);
    check_box(s);
    sm_source_close(s);
}

static void test_nii_gz(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/v.nii.gz", dir);
    uint8_t h[352];
    int16_t v[N];
    header(h, 0.5f);
    volume_le(v);
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, h, sizeof(h)), sizeof(h));
    assert_int_equal(gzwrite(gz, v, sizeof(v)), sizeof(v));
    assert_int_equal(gzclose(gz), Z_OK);
    const struct sm_source_params p = {.format = "nifti", .path = path};
    struct sm_source *s = open_ok(&p);
    assert_int_equal(sm_source_info(s)->access, SM_SOURCE_STREAM); /* inflated forward by plan */
    assert_int_equal(sm_source_bytes_read(s), 0);
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t off[3] = {1, 0, 0}, shape[3] = {2, Y, X}; /* z 1..2: the volume's end */
    assert_int_equal(sm_source_plan(s, off, shape, 2 * Y * X * 2 - 1, &err), SM_E_LIMIT);
    assert_non_null(strstr(err.what, "limits.memory_bytes"));
    sm_err_clear(&err);
    assert_int_equal(sm_source_plan(s, off, shape, 1 << 20, &err), SM_OK);
    /* the whole (small) file was read: to the slabs, then to its trailer */
    assert_int_equal(sm_source_bytes_read(s), file_size(path));
    check_box(s);
    assert_int_equal(sm_source_bytes_read(s), file_size(path)); /* served from memory */
    const uint64_t z0[3] = {0, 0, 0}, one[3] = {1, 1, 1};       /* outside the planned slabs */
    float x;
    assert_int_equal(sm_source_read_box(s, 0, z0, one, &x, &err), SM_E_INTERNAL);
    sm_source_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw),
        cmocka_unit_test(test_nii),
        cmocka_unit_test(test_pixdim),
        cmocka_unit_test(test_nii_gz),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
