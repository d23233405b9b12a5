/* libtiff for the TIFF source (source_tiff_int.h): loaded on first use, a handle per open with its
 * own error handler, and the page geometry the source accepts. */
#include "source_tiff_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shardmill/library.h"
#include "source_int.h"
#include "source_tiff_meta_int.h"

static struct sm_tiff_lib tiff;
static char tiff_load_error[200];
static pthread_once_t tiff_once = PTHREAD_ONCE_INIT;

static void tiff_init_once(void)
{
    static const struct sm_library_sym syms[] = {
        {"TIFFOpenOptionsAlloc", (void **)&tiff.opts_alloc},
        {"TIFFOpenOptionsFree", (void **)&tiff.opts_free},
        {"TIFFOpenOptionsSetMaxSingleMemAlloc", (void **)&tiff.opts_max_alloc},
        {"TIFFOpenOptionsSetErrorHandlerExtR", (void **)&tiff.opts_err},
        {"TIFFOpenOptionsSetWarningHandlerExtR", (void **)&tiff.opts_warn},
        {"TIFFClose", (void **)&tiff.close},
        {"TIFFGetField", (void **)&tiff.get_field},
        {"TIFFGetFieldDefaulted", (void **)&tiff.get_field_defaulted},
        {"TIFFReadDirectory", (void **)&tiff.read_directory},
        {"TIFFCurrentDirOffset", (void **)&tiff.current_dir_offset},
        {"TIFFSetSubDirectory", (void **)&tiff.set_sub_directory},
        {"TIFFIsTiled", (void **)&tiff.is_tiled},
        {"TIFFIsByteSwapped", (void **)&tiff.is_byte_swapped},
        {"TIFFIsCODECConfigured", (void **)&tiff.codec_configured},
        {"TIFFStripSize", (void **)&tiff.strip_size},
        {"TIFFTileSize", (void **)&tiff.tile_size},
        {"TIFFComputeTile", (void **)&tiff.compute_tile},
        {"TIFFReadEncodedStrip", (void **)&tiff.read_strip},
        {"TIFFReadEncodedTile", (void **)&tiff.read_tile},
        {"TIFFFdOpenExt", (void **)&tiff.fdopen_ext}, /* last: non-NULL means all loaded */
    };
    if (!sm_library_load("libtiff.so.6", syms, sizeof(syms) / sizeof(syms[0]), tiff_load_error,
                         sizeof(tiff_load_error))) {
        return;
    }
}

const struct sm_tiff_lib *sm_tiff_load(const char *path, struct sm_err *err)
{
    pthread_once(&tiff_once, tiff_init_once);
    if (tiff.fdopen_ext == NULL) {
        SM_ERR_AT(err, SM_E_IO, path,
                  "TIFF input needs libtiff (libtiff.so.6, Debian package libtiff6): %s",
                  tiff_load_error);
        return NULL;
    }
    return &tiff;
}

static int on_error(TIFF *t, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)t;
    (void)module;
    struct sm_tfile *f = user;
    if (f->msg[0] == '\0') {
        /* libtiff's own format string: trusted as its printf-style handler contract says */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
#pragma GCC diagnostic pop
    }
    return 1; /* handled: nothing goes to stderr */
}

static int on_warning(TIFF *t, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)t;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1; /* unknown tags and the like: not our concern */
}

sm_status sm_tfile_open(const struct sm_tiff_lib *lib, struct sm_tfile *f, const char *path,
                        uint64_t max_alloc, struct sm_err *err)
{
    memset(f, 0, sizeof(*f));
    f->lib = lib;
    f->fd = -1;
    f->opts = lib->opts_alloc();
    if (f->opts == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate libtiff options");
    }
    lib->opts_err(f->opts, on_error, f);
    lib->opts_warn(f->opts, on_warning, f);
    if (max_alloc != 0) {
        lib->opts_max_alloc(f->opts, (tmsize_t)(max_alloc > INT64_MAX ? INT64_MAX : max_alloc));
    }
    /* our own descriptor: a FIFO or device is refused before libtiff reads (issue 32 item 9) */
    int fd = -1;
    sm_status st = sm_src_open_file(path, false, &fd, err);
    /* "m": read with pread, not a mapping of the file: a stack opens one file per slice, and with
     * several threads each munmap at TIFFClose stops the other cores to flush their TLBs (~0.1
     * ms on a virtual machine; 216 of them were 28 ms of a 190 ms ingest of the head CT).
     * "c": no strip chopping: libtiff would present an uncompressed one-strip page as 8 KiB
     * strips of two rows, and the box read would pread 8 KiB at a time (1,024 preads per 2048²
     * uint16 slice); the page's real strips are read whole or in part by pread (read_direct).
     * TIFFClose closes fd; a failed open leaves it to us. */
    f->t = st == SM_OK ? lib->fdopen_ext(fd, path, "rmc", f->opts) : NULL;
    f->fd = f->t != NULL ? fd : -1;
    if (st == SM_OK && f->t == NULL) {
        close(fd);
        st = SM_ERR_AT(err, SM_E_DATA, path, "not a readable TIFF file: %s",
                       f->msg[0] != '\0' ? f->msg : "libtiff refused it");
    }
    if (st != SM_OK) {
        lib->opts_free(f->opts);
        f->opts = NULL;
    }
    return st;
}

void sm_tfile_close(struct sm_tfile *f)
{
    if (f->t != NULL) {
        f->lib->close(f->t);
    }
    if (f->opts != NULL) {
        f->lib->opts_free(f->opts);
    }
    f->t = NULL;
    f->opts = NULL;
    f->fd = -1;
}

/* The sample format and width as a data type: 8/16/32-bit integers, 32/64-bit floats. */
static bool sample_dtype(uint16_t fmt, uint16_t bits, enum sm_dtype *dt)
{
    static const struct {
        uint16_t fmt, bits;
        enum sm_dtype dt;
    } types[] = {
        {SAMPLEFORMAT_UINT, 8, SM_DT_UINT8},      {SAMPLEFORMAT_UINT, 16, SM_DT_UINT16},
        {SAMPLEFORMAT_UINT, 32, SM_DT_UINT32},    {SAMPLEFORMAT_INT, 8, SM_DT_INT8},
        {SAMPLEFORMAT_INT, 16, SM_DT_INT16},      {SAMPLEFORMAT_INT, 32, SM_DT_INT32},
        {SAMPLEFORMAT_IEEEFP, 32, SM_DT_FLOAT32}, {SAMPLEFORMAT_IEEEFP, 64, SM_DT_FLOAT64},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (types[i].fmt == fmt && types[i].bits == bits) {
            *dt = types[i].dt;
            return true;
        }
    }
    return false;
}

sm_status sm_tiff_read_page(struct sm_tfile *f, struct sm_tiff_page *p, struct sm_err *err)
{
    const struct sm_tiff_lib *lib = f->lib;
    uint32_t w = 0, h = 0;
    uint16_t bits = 0, fmt = SAMPLEFORMAT_UINT, spp = 1, comp = COMPRESSION_NONE;
    uint16_t photo = PHOTOMETRIC_MINISBLACK;
    lib->get_field_defaulted(f->t, TIFFTAG_IMAGEWIDTH, &w);
    lib->get_field_defaulted(f->t, TIFFTAG_IMAGELENGTH, &h);
    lib->get_field_defaulted(f->t, TIFFTAG_BITSPERSAMPLE, &bits);
    lib->get_field_defaulted(f->t, TIFFTAG_SAMPLEFORMAT, &fmt);
    lib->get_field_defaulted(f->t, TIFFTAG_SAMPLESPERPIXEL, &spp);
    lib->get_field_defaulted(f->t, TIFFTAG_COMPRESSION, &comp);
    lib->get_field_defaulted(f->t, TIFFTAG_PHOTOMETRIC, &photo);
    if (w == 0 || h == 0) {
        SM_FAIL(err, SM_E_DATA, "the image is %" PRIu32 " x %" PRIu32 " pixels", w, h);
    }
    if (spp != 1 || photo == PHOTOMETRIC_PALETTE) {
        SM_FAIL(err, SM_E_DATA,
                "%u samples per pixel (photometric %u): only single-channel grey slices are read",
                (unsigned)spp, (unsigned)photo);
    }
    if (!lib->codec_configured(comp)) {
        SM_FAIL(err, SM_E_DATA, "compression %u is not decoded by this libtiff", (unsigned)comp);
    }
    if (!sample_dtype(fmt, bits, &p->dtype)) {
        SM_FAIL(err, SM_E_DATA,
                "%u-bit samples of format %u: 8/16/32-bit integers and 32/64-bit floats are read",
                (unsigned)bits, (unsigned)fmt);
    }
    p->width = w;
    p->height = h;
    return SM_OK;
}

sm_status sm_tiff_read_block(struct sm_tfile *f, const struct sm_tiff_page *p,
                             struct sm_tiff_block *b, struct sm_err *err)
{
    const struct sm_tiff_lib *lib = f->lib;
    uint16_t comp = COMPRESSION_NONE, fill = FILLORDER_MSB2LSB;
    lib->get_field_defaulted(f->t, TIFFTAG_COMPRESSION, &comp);
    lib->get_field_defaulted(f->t, TIFFTAG_FILLORDER, &fill);
    b->tiled = lib->is_tiled(f->t) != 0;
    b->bw = p->width;
    b->bh = 0;
    if (b->tiled) {
        lib->get_field_defaulted(f->t, TIFFTAG_TILEWIDTH, &b->bw);
        lib->get_field_defaulted(f->t, TIFFTAG_TILELENGTH, &b->bh);
    } else {
        lib->get_field_defaulted(f->t, TIFFTAG_ROWSPERSTRIP, &b->bh);
        b->bh = b->bh > p->height ? p->height : b->bh;
    }
    b->direct = comp == COMPRESSION_NONE && fill == FILLORDER_MSB2LSB;
    if (b->bw == 0 || b->bh == 0) {
        SM_FAIL(err, SM_E_DATA, "a %s of %" PRIu32 " x %" PRIu32 " pixels",
                b->tiled ? "tile" : "strip", b->bw, b->bh);
    }
    return SM_OK;
}

void sm_tiff_read_geometry(struct sm_tfile *f, struct sm_tiff_geom *g)
{
    const struct sm_tiff_lib *lib = f->lib;
    struct sm_tiff_tags t = {.resunit = RESUNIT_INCH};
    char *desc = NULL;
    if (lib->get_field(f->t, TIFFTAG_IMAGEDESCRIPTION, &desc) == 1 && desc != NULL) {
        t.desc = desc; /* libtiff's copy, NUL-terminated, valid while the directory is */
        t.desc_len = strlen(desc);
    }
    float xres = 0, yres = 0; /* libtiff hands rationals of these tags out as float */
    t.has_res = lib->get_field(f->t, TIFFTAG_XRESOLUTION, &xres) == 1 &&
                lib->get_field(f->t, TIFFTAG_YRESOLUTION, &yres) == 1;
    t.xres = xres;
    t.yres = yres;
    lib->get_field_defaulted(f->t, TIFFTAG_RESOLUTIONUNIT, &t.resunit);
    sm_tiff_geometry(&t, g);
}
