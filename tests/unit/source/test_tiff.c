/* Unit tests for engine/source/source_tiff.c: the natural name order of stack slices, the refusals
 * (a path that does not exist, a directory without slices, a file that is not a TIFF), and stacks
 * written here with libtiff (a directory of strip slices in natural order, a multi-page tiled
 * file, an uncompressed big-endian file, an uncompressed one-strip page): values, info (the read
 * block and its access), and sm_source_bytes_read counting the encoded bytes a box fetched: the
 * stored bytes of every compressed strip or tile it decoded (libtiff's byte counts, read back
 * here), the box's own bytes of an uncompressed page (issue 33). Stacks written by tifffile are
 * read in tests/convert/test_ingest_tiff.py. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <tiffio.h>

#include "source_int.h"

static void test_natural_order(void **state)
{
    (void)state;
    assert_true(sm_src_natural_cmp("s2.tif", "s10.tif") < 0);
    assert_true(sm_src_natural_cmp("s10.tif", "s9.tif") > 0);
    assert_true(sm_src_natural_cmp("slice_0009.tif", "slice_0010.tif") < 0);
    assert_true(sm_src_natural_cmp("a.tif", "b.tif") < 0);
    assert_true(sm_src_natural_cmp("img1_z2.tif", "img1_z10.tif") < 0);
    assert_true(sm_src_natural_cmp("img2_z1.tif", "img10_z1.tif") < 0);
    assert_int_equal(sm_src_natural_cmp("x7.tif", "x7.tif"), 0);
    /* the same number written differently: still a strict, consistent order */
    const int a = sm_src_natural_cmp("x01.tif", "x1.tif");
    assert_true(a != 0);
    assert_int_equal(sm_src_natural_cmp("x1.tif", "x01.tif"), -a);
    assert_true(sm_src_natural_cmp("s1", "s1.tif") < 0);
    /* digit runs longer than any integer type */
    assert_true(sm_src_natural_cmp("n99999999999999999999999", "n100000000000000000000000") < 0);
}

static char tmpdir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sm_tiff_unit_XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int remove_dir(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
        char path[512];
        if (de->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return rmdir(tmpdir);
}

/* Page z of the test stacks: uint16, value z * 1000 + y * w + x. */
static uint16_t value(uint64_t z, uint64_t y, uint64_t x, uint32_t w)
{
    return (uint16_t)(z * 1000 + y * w + x);
}

static uint16_t compression = COMPRESSION_DEFLATE; /* of the pages written next */

static void page_fields(TIFF *t, uint32_t w, uint32_t h)
{
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
}

/* One page of page z in strips of `rps` rows (the last one shorter). */
static void write_strips(TIFF *t, uint64_t z, uint32_t w, uint32_t h, uint32_t rps)
{
    page_fields(t, w, h);
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, rps);
    uint16_t buf[64 * 64];
    for (uint32_t y0 = 0; y0 < h; y0 += rps) {
        const uint32_t rows = y0 + rps <= h ? rps : h - y0;
        for (uint32_t i = 0; i < rows * w; i++) {
            buf[i] = value(z, y0 + i / w, i % w, w);
        }
        assert_true(TIFFWriteEncodedStrip(t, y0 / rps, buf, (tmsize_t)(rows * w * 2)) >= 0);
    }
}

/* One page of page z in 16 x 16 tiles (edge tiles padded). */
static void write_tiles(TIFF *t, uint64_t z, uint32_t w, uint32_t h)
{
    page_fields(t, w, h);
    TIFFSetField(t, TIFFTAG_TILEWIDTH, 16);
    TIFFSetField(t, TIFFTAG_TILELENGTH, 16);
    uint16_t buf[16 * 16];
    for (uint32_t ty = 0; ty < h; ty += 16) {
        for (uint32_t tx = 0; tx < w; tx += 16) {
            for (uint32_t i = 0; i < 16 * 16; i++) {
                const uint32_t y = ty + i / 16, x = tx + i % 16;
                buf[i] = y < h && x < w ? value(z, y, x, w) : 0;
            }
            assert_true(TIFFWriteEncodedTile(t, TIFFComputeTile(t, tx, ty, 0, 0), buf,
                                             (tmsize_t)sizeof(buf)) >= 0);
        }
    }
}

/* The stored bytes of strip or tile `block` of page `page` of the file at path (libtiff's count).
 */
static uint64_t stored_bytes(const char *path, unsigned page, uint32_t block)
{
    TIFF *t = TIFFOpen(path, "r");
    assert_non_null(t);
    assert_true(TIFFSetDirectory(t, (tdir_t)page));
    uint64_t *counts = NULL;
    assert_true(TIFFGetField(t, TIFFIsTiled(t) ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_STRIPBYTECOUNTS,
                             &counts));
    const uint64_t n = counts[block];
    TIFFClose(t);
    return n;
}

static struct sm_source *open_stack(const char *path)
{
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_source_params p = {.format = "tiff", .path = path, .max_alloc = 1 << 20};
    if (sm_source_open(&p, &s, &err) != SM_OK) {
        fail_msg("open %s: %s: %s", path, err.where, err.what);
    }
    return s;
}

/* A directory s1.tif .. s12.tif of 8 x 6 slices in strips of 4 rows: slices k..k+n read whole
 * count n slices' decoded bytes; a box inside the first strip of a slice counts that strip. */
static void test_directory_stack(void **state)
{
    (void)state;
    enum { W = 8, H = 6, S = 12 };
    for (int k = 1; k <= S; k++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/s%d.tif", tmpdir, k);
        TIFF *t = TIFFOpen(path, "w");
        assert_non_null(t);
        write_strips(t, (uint64_t)k - 1, W, H, 4);
        TIFFClose(t);
    }
    struct sm_source *s = open_stack(tmpdir);
    const struct sm_source_info *in = sm_source_info(s);
    assert_string_equal(in->format, "tiff");
    assert_int_equal(in->dtype, SM_DT_UINT16);
    assert_int_equal(in->shape[0], S);
    assert_int_equal(in->shape[1], H);
    assert_int_equal(in->shape[2], W);
    assert_int_equal(in->slab[0], 1); /* a strip of 4 rows, deflated: decoded whole */
    assert_int_equal(in->slab[1], 4);
    assert_int_equal(in->slab[2], W);
    assert_int_equal(in->access, SM_SOURCE_BLOCKS);
    uint64_t want = 0; /* every strip of s10, s11, s12 */
    for (int k = 10; k <= 12; k++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/s%d.tif", tmpdir, k);
        for (uint32_t b = 0; b < (H + 3) / 4; b++) {
            want += stored_bytes(path, 0, b);
        }
    }
    uint16_t out[3 * H * W];
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t off[3] = {9, 0, 0}, shape[3] = {3, H, W}; /* s10, s11, s12: natural order */
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    assert_int_equal(out[0], value(9, 0, 0, W));
    assert_int_equal(out[H * W + W + 1], value(10, 1, 1, W));
    assert_int_equal(out[3 * H * W - 1], value(11, H - 1, W - 1, W));
    assert_int_equal(sm_source_bytes_read(s), want);
    assert_true(want < 3 * H * W * 2);                         /* stored, not decoded, bytes */
    const uint64_t off2[3] = {1, 1, 2}, shape2[3] = {1, 2, 3}; /* rows 1..2: strip 0 alone */
    assert_int_equal(sm_source_read_box(s, 0, off2, shape2, out, &err), SM_OK);
    assert_int_equal(out[0], value(1, 1, 2, W));
    assert_int_equal(out[5], value(1, 2, 4, W));
    char s2[128];
    snprintf(s2, sizeof(s2), "%s/s2.tif", tmpdir);
    assert_int_equal(sm_source_bytes_read(s), want + stored_bytes(s2, 0, 0));
    json_t *d = sm_source_describe(s);
    assert_string_equal(json_string_value(json_object_get(d, "format")), "tiff");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "file"), "files")), S);
    json_decref(d);
    sm_source_close(s);
}

/* A multi-page file of 20 x 20 pages in 16 x 16 tiles: a box inside one tile decodes that tile,
 * a whole page its four (padded) tiles. */
static void test_multipage_tiles(void **state)
{
    (void)state;
    enum { W = 20, H = 20, P = 3 };
    char path[128];
    snprintf(path, sizeof(path), "%s/pages.tif", tmpdir);
    TIFF *t = TIFFOpen(path, "w");
    assert_non_null(t);
    for (uint64_t z = 0; z < P; z++) {
        write_tiles(t, z, W, H);
        assert_true(TIFFWriteDirectory(t));
    }
    TIFFClose(t);
    struct sm_source *s = open_stack(path);
    assert_int_equal(sm_source_info(s)->shape[0], P);
    assert_int_equal(sm_source_info(s)->slab[1], 16); /* a tile */
    assert_int_equal(sm_source_info(s)->slab[2], 16);
    assert_int_equal(sm_source_info(s)->access, SM_SOURCE_BLOCKS);
    uint16_t out[H * W];
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t off[3] = {2, 1, 1}, shape[3] = {1, 4, 4};
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    assert_int_equal(out[0], value(2, 1, 1, W));
    assert_int_equal(out[15], value(2, 4, 4, W));
    const uint64_t one = stored_bytes(path, 2, 0);
    assert_int_equal(sm_source_bytes_read(s), one);
    const uint64_t page[3] = {1, 0, 0}, whole[3] = {1, H, W};
    assert_int_equal(sm_source_read_box(s, 0, page, whole, out, &err), SM_OK);
    assert_int_equal(out[H * W - 1], value(1, H - 1, W - 1, W));
    assert_int_equal(sm_source_bytes_read(s),
                     one + stored_bytes(path, 1, 0) + stored_bytes(path, 1, 1) +
                         stored_bytes(path, 1, 2) + stored_bytes(path, 1, 3));
    sm_source_close(s);
}

/* An uncompressed big-endian multi-page file in strips of 4 rows: read in part by pread (access
 * RANDOM), values swapped to native order, and a box fetches its own bytes only; a strip whose
 * bytes lie past the end of the file is SM_E_DATA naming the strip. */
static void test_uncompressed(void **state)
{
    (void)state;
    enum { W = 20, H = 10, P = 2 };
    char path[128];
    snprintf(path, sizeof(path), "%s/plain.tif", tmpdir);
    TIFF *t = TIFFOpen(path, "wb");
    assert_non_null(t);
    compression = COMPRESSION_NONE;
    for (uint64_t z = 0; z < P; z++) {
        write_strips(t, z, W, H, 4);
        assert_true(TIFFWriteDirectory(t));
    }
    TIFFClose(t);
    compression = COMPRESSION_DEFLATE;
    struct sm_source *s = open_stack(path);
    const struct sm_source_info *in = sm_source_info(s);
    assert_int_equal(in->access, SM_SOURCE_RANDOM);
    assert_int_equal(in->slab[1], 4);
    assert_int_equal(in->slab[2], W);
    uint16_t out[H * W];
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t off[3] = {1, 3, 2}, shape[3] = {1, 4, 5}; /* rows 3..6: strips 0 and 1 */
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    for (uint64_t y = 0; y < 4; y++) {
        for (uint64_t x = 0; x < 5; x++) {
            assert_int_equal(out[y * 5 + x], value(1, 3 + y, 2 + x, W));
        }
    }
    assert_int_equal(sm_source_bytes_read(s), 4 * 5 * 2);
    const uint64_t page[3] = {0, 0, 0}, whole[3] = {1, H, W};
    assert_int_equal(sm_source_read_box(s, 0, page, whole, out, &err), SM_OK);
    assert_int_equal(out[H * W - 1], value(0, H - 1, W - 1, W));
    assert_int_equal(sm_source_bytes_read(s), 4 * 5 * 2 + H * W * 2);
    sm_source_close(s);
}

/* One uncompressed strip of a whole 96 x 64 page (12 KiB, as tifffile writes CT slices): the read
 * block is the page, not libtiff's chopped 8 KiB strips of 64 rows (opened without "c", a whole
 * slice read by pread 8 KiB at a time), and a box reads its rows. */
static void test_one_strip_page(void **state)
{
    (void)state;
    enum { W = 64, H = 96 };
    char path[128];
    snprintf(path, sizeof(path), "%s/s1.tif", tmpdir);
    TIFF *t = TIFFOpen(path, "w");
    assert_non_null(t);
    page_fields(t, W, H);
    TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, H);
    static uint16_t buf[H * W];
    for (uint32_t i = 0; i < H * W; i++) {
        buf[i] = value(0, i / W, i % W, W);
    }
    assert_true(TIFFWriteEncodedStrip(t, 0, buf, (tmsize_t)sizeof(buf)) >= 0);
    TIFFClose(t);
    struct sm_source *s = open_stack(tmpdir);
    const struct sm_source_info *in = sm_source_info(s);
    assert_int_equal(in->access, SM_SOURCE_RANDOM);
    assert_int_equal(in->slab[1], H);
    assert_int_equal(in->slab[2], W);
    static uint16_t out[H * W];
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t off[3] = {0, 40, 0}, shape[3] = {1, 50, W}; /* across the chopped strips */
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    assert_memory_equal(out, buf + 40 * W, 50 * W * 2);
    assert_int_equal(sm_source_bytes_read(s), 50 * W * 2);
    sm_source_close(s);
}

static void test_refusals(void **state)
{
    (void)state;
    struct sm_source *t = NULL;
    struct sm_source_params p = {.format = "tiff"};
    struct sm_err err;
    char path[128];

    sm_err_clear(&err);
    snprintf(path, sizeof(path), "%s/missing", tmpdir);
    p.path = path;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_IO);
    assert_null(t);
    assert_non_null(strstr(err.where, "missing"));

    sm_err_clear(&err); /* a directory with no .tif / .tiff file */
    snprintf(path, sizeof(path), "%s/notes.txt", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a slice\n", f);
    fclose(f);
    p.path = tmpdir;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_DATA);
    assert_null(t);
    assert_non_null(strstr(err.what, "no .tif"));

    sm_err_clear(&err); /* a slice that is not a TIFF: named */
    snprintf(path, sizeof(path), "%s/s1.tif", tmpdir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("II*\0 but nothing after it", f);
    fclose(f);
    p.path = tmpdir;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_DATA);
    assert_null(t);
    assert_non_null(strstr(err.where, "s1.tif"));

    sm_err_clear(&err); /* the same file given as a multi-page file */
    p.path = path;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_DATA);
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_natural_order),
        cmocka_unit_test_setup_teardown(test_refusals, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_directory_stack, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_multipage_tiles, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_uncompressed, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_one_strip_page, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
