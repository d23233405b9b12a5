/* The source conformance suite (issue 36 #2): every row of the source registry
 * (sm_source_formats) through one table of cases, as the store and codec suites do: a maker
 * writes the same volume (uint16, [3, 5, 6], v = 100 z + 10 y + x) in the source's format, and
 * every case is checked alike: shape, type, describe's format, the corner and edge boxes, the
 * byte counter, and the file truncated to half giving a data error. Included by
 * tests/unit/source/test_source_suite_hdf5.c (the name links HDF5, which writes its file). */
#include "shardmill/sm_config.h"

#include <hdf5.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include <jansson.h>

#include "shardmill/source.h"
#include "sm_test.h"

#define SZ 3
#define SY 5
#define SX 6

static uint16_t suite_value(unsigned z, unsigned y, unsigned x)
{
    return (uint16_t)(100 * z + 10 * y + x);
}

static void suite_volume(uint16_t v[SZ * SY * SX])
{
    for (unsigned i = 0; i < SZ * SY * SX; i++) {
        v[i] = suite_value(i / (SY * SX), i / SX % SY, i % SX);
    }
}

static void suite_write(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(a, 1, na, f), na);
    if (nb > 0) {
        assert_int_equal(fwrite(b, 1, nb, f), nb);
    }
    assert_int_equal(fclose(f), 0);
}

static void make_raw(const char *path, struct sm_source_params *p)
{
    uint16_t v[SZ * SY * SX];
    suite_volume(v);
    suite_write(path, v, sizeof(v), NULL, 0);
    p->raw_dtype = SM_DT_UINT16;
    p->raw_ndim = 3;
    p->raw_shape[0] = SZ, p->raw_shape[1] = SY, p->raw_shape[2] = SX;
}

static void make_nifti(const char *path, struct sm_source_params *p)
{
    (void)p;
    uint8_t h[352];
    memset(h, 0, sizeof(h));
    const int32_t sizeof_hdr = 348;
    memcpy(h, &sizeof_hdr, 4);
    const int16_t dim[8] = {3, SX, SY, SZ, 1, 1, 1, 1}, datatype = 512, bitpix = 16;
    memcpy(h + 40, dim, sizeof(dim));
    memcpy(h + 70, &datatype, 2);
    memcpy(h + 72, &bitpix, 2);
    const float pixdim[4] = {1.0f, 1.0f, 1.0f, 1.0f}, vox = 352.0f;
    memcpy(h + 76, pixdim, sizeof(pixdim));
    memcpy(h + 108, &vox, 4);
    memcpy(h + 344, "n+1", 4);
    uint16_t v[SZ * SY * SX];
    suite_volume(v);
    suite_write(path, h, sizeof(h), v, sizeof(v));
}

static void make_tiff(const char *path, struct sm_source_params *p)
{
    (void)p;
    TIFF *t = TIFFOpen(path, "w");
    assert_non_null(t);
    uint16_t v[SZ * SY * SX];
    suite_volume(v);
    for (unsigned z = 0; z < SZ; z++) {
        TIFFSetField(t, TIFFTAG_IMAGEWIDTH, (uint32_t)SX);
        TIFFSetField(t, TIFFTAG_IMAGELENGTH, (uint32_t)SY);
        TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
        TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
        TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
        TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
        TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, (uint32_t)SY);
        assert_true(TIFFWriteEncodedStrip(t, 0, v + z * SY * SX, SY * SX * 2) >= 0);
        assert_true(TIFFWriteDirectory(t) == 1);
    }
    TIFFClose(t);
}

static void make_hdf5(const char *path, struct sm_source_params *p)
{
    p->hdf5_dataset = "/data";
    uint16_t v[SZ * SY * SX];
    suite_volume(v);
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    const hsize_t dims[3] = {SZ, SY, SX};
    const hid_t space = H5Screate_simple(3, dims, NULL);
    const hid_t d =
        H5Dcreate2(f, "/data", H5T_STD_U16LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    assert_true(H5Dwrite(d, H5T_NATIVE_USHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
}

/* A PNG chunk: length, type, data, the CRC-32 of type and data (big-endian). */
static void png_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n)
{
    const uLong crc = crc32(crc32(0, (const Bytef *)type, 4), data, n);
    const uint8_t len[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    const uint8_t sum[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
                            (uint8_t)crc};
    assert_int_equal(fwrite(len, 1, 4, f), 4);
    assert_int_equal(fwrite(type, 1, 4, f), 4);
    assert_int_equal(n == 0 ? 0 : fwrite(data, 1, n, f), n);
    assert_int_equal(fwrite(sum, 1, 4, f), 4);
}

/* Slice z as a 16-bit grayscale PNG written here from the PNG specification (rows of filter 0,
 * big-endian values, zlib's compress2 and crc32): bytes no PNG library made. */
static void make_png_slice(const char *path, unsigned z)
{
    uint8_t raw[SY * (1 + 2 * SX)], packed[256];
    for (unsigned y = 0, at = 0; y < SY; y++) {
        raw[at++] = 0;
        for (unsigned x = 0; x < SX; x++) {
            raw[at++] = (uint8_t)(suite_value(z, y, x) >> 8);
            raw[at++] = (uint8_t)suite_value(z, y, x);
        }
    }
    uLongf np = sizeof(packed);
    assert_int_equal(compress2(packed, &np, raw, sizeof(raw), 9), Z_OK);
    const uint8_t ihdr[13] = {0, 0, 0, SX, 0, 0, 0, SY, 16, 0, 0, 0, 0};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("\x89PNG\r\n\x1a\n", 1, 8, f), 8);
    png_chunk(f, "IHDR", ihdr, sizeof(ihdr));
    png_chunk(f, "IDAT", packed, (uint32_t)np);
    png_chunk(f, "IEND", NULL, 0);
    assert_int_equal(fclose(f), 0);
}

/* One case per source of the registry: its name, a file name ending, its maker. A stack of
 * slice files (slices true) is a directory at the path holding s1<suffix> .. s3<suffix>, which
 * the maker writes one by one with make_slice instead. */
static const struct source_suite_case {
    const char *format;
    const char *suffix;
    void (*make)(const char *path, struct sm_source_params *p);
    bool slices;
    void (*make_slice)(const char *path, unsigned z);
} source_suite_cases[] = {
    {.format = "raw", .suffix = ".raw", .make = make_raw},
    {.format = "nifti", .suffix = ".nii", .make = make_nifti},
    {.format = "tiff", .suffix = ".tif", .make = make_tiff},
    {.format = "hdf5", .suffix = ".h5", .make = make_hdf5},
    {.format = "png", .suffix = ".png", .slices = true, .make_slice = make_png_slice},
};
#define SOURCE_SUITE_N (sizeof(source_suite_cases) / sizeof(source_suite_cases[0]))

static void suite_box(struct sm_source *s, unsigned z, unsigned y, unsigned x, unsigned dz,
                      unsigned dy, unsigned dx)
{
    uint16_t out[SZ * SY * SX];
    const uint64_t off[3] = {z, y, x}, shape[3] = {dz, dy, dx};
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t before = sm_source_bytes_read(s);
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    assert_true(sm_source_bytes_read(s) > before); /* the byte counter moves */
    for (unsigned i = 0; i < dz * dy * dx; i++) {
        assert_int_equal(out[i], suite_value(z + i / (dy * dx), y + i / dx % dy, x + i % dx));
    }
}

/* The slice files of a stack case: path/s<z + 1><suffix>. */
static void suite_slice_path(char *out, size_t cap, const char *path,
                             const struct source_suite_case *c, unsigned z)
{
    snprintf(out, cap, "%s/s%u%s", path, z + 1, c->suffix);
}

/* Every case on one source: shape, type, describe, corner and edge boxes, the counter, and the
 * truncated file (a stack: its second slice, cut to half). */
static void source_suite_run(const struct source_suite_case *c)
{
    char path[96], victim[128];
    snprintf(path, sizeof(path), "/tmp/sm_source_suite_%d%s", (int)getpid(),
             c->slices ? "" : c->suffix);
    snprintf(victim, sizeof(victim), "%s", path);
    struct sm_source_params p;
    memset(&p, 0, sizeof(p));
    p.format = c->format;
    p.path = path;
    if (c->slices) {
        assert_int_equal(mkdir(path, 0700), 0);
        for (unsigned z = 0; z < SZ; z++) {
            suite_slice_path(victim, sizeof(victim), path, c, z);
            c->make_slice(victim, z);
        }
        suite_slice_path(victim, sizeof(victim), path, c, 1);
    } else {
        c->make(path, &p);
    }
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_open(&p, &s, &err), SM_OK);
    const struct sm_source_info *in = sm_source_info(s);
    assert_int_equal(in->ndim, 3);
    assert_int_equal(in->shape[0], SZ);
    assert_int_equal(in->shape[1], SY);
    assert_int_equal(in->shape[2], SX);
    assert_int_equal(in->dtype, SM_DT_UINT16);
    assert_string_equal(in->format, c->format);
    struct json_t *d = sm_source_describe(s);
    assert_non_null(d);
    json_decref(d);
    assert_int_equal(sm_source_plan(s, (const uint64_t[3]){0, 0, 0},
                                    (const uint64_t[3]){SZ, SY, SX}, 1u << 30, &err),
                     SM_OK);
    suite_box(s, 0, 0, 0, 1, 1, 1);                /* the first voxel */
    suite_box(s, SZ - 1, SY - 1, SX - 1, 1, 1, 1); /* the last */
    suite_box(s, 1, SY - 2, SX - 3, 2, 2, 3);      /* an edge box */
    suite_box(s, 0, 0, 0, SZ, SY, SX);             /* the whole volume */
    sm_source_close(s);
    /* truncated to half: a data error at open or at the read of the whole volume */
    struct stat vs;
    assert_int_equal(stat(victim, &vs), 0);
    assert_int_equal(truncate(victim, c->slices ? vs.st_size / 2 : 200), 0);
    s = NULL;
    sm_err_clear(&err);
    sm_status st = sm_source_open(&p, &s, &err);
    if (st == SM_OK) {
        uint16_t out[SZ * SY * SX];
        st = sm_source_read_box(s, 0, (const uint64_t[3]){0, 0, 0}, (const uint64_t[3]){SZ, SY, SX},
                                out, &err);
        sm_source_close(s);
    }
    if (st != SM_E_DATA) {
        fail_msg("%s: truncated file gives %s, not a data error (%s)", c->format,
                 sm_status_name(st), err.what);
    }
    for (unsigned z = 0; c->slices && z < SZ; z++) {
        suite_slice_path(victim, sizeof(victim), path, c, z);
        unlink(victim);
    }
    (void)(c->slices ? rmdir(path) : unlink(path));
}

/* Every source of the registry has a case, and every case names one. */
static void source_suite_covers_the_registry(void)
{
    unsigned n = 0;
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++, n++) {
        bool found = false;
        for (size_t i = 0; i < SOURCE_SUITE_N; i++) {
            found = found || strcmp(source_suite_cases[i].format, f->name) == 0;
        }
        if (!found) {
            fail_msg("source %s has no case in tests/suites/source_suite.c", f->name);
        }
    }
    assert_int_equal(n, SOURCE_SUITE_N);
}
