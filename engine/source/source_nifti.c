/* A NIfTI-1 file as a source (SPEC §2): the header is parsed by a pure function
 * (source_nifti_hdr.c: no Debian C library reads it without pulling a toolkit); here the volume it
 * declares is checked against the file before anything is read or allocated, and the values are
 * read by source_flat.c (scl_slope/scl_inter applied). A .nii is read by pread. A .nii.gz is never
 * inflated whole: open reads its header through a zlib stream, and plan (called with the box of
 * this rank's reads) inflates the stream once, keeping only the axis-0 slabs of that box, checked
 * against limits.memory_bytes first; read_box then copies from memory. */
#include "shardmill/sm_config.h"

#include "source_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "source_nifti_int.h"

struct nifti {
    struct sm_flat flat;
    char *path;
    struct sm_nifti_hdr hdr;
    bool gz;
    uint8_t *mem;           /* .nii.gz: the inflated slabs this rank reads (owned) */
    struct sm_source *self; /* plan counts the compressed bytes it reads */
};

/* The parsed header into the reader: shape, offsets, scaling; the data must lie in the file
 * (file_len: of a .nii.gz, the most its compressed size can inflate to). */
static sm_status take_header(struct nifti *n, const uint8_t *h, size_t hlen, uint64_t file_len,
                             struct sm_err *err)
{
    struct sm_nifti_hdr *x = &n->hdr;
    if (sm_nifti_parse_header(h, hlen, x, err) != SM_OK) {
        char field[sizeof(err->where)];
        snprintf(field, sizeof(field), "%s", err->where);
        err->where[0] = '\0';
        sm_err_where(err, "%s: %s", n->path, field);
        return err->status;
    }
    struct sm_flat *f = &n->flat;
    f->stored = x->dtype;
    f->ndim = x->ndim;
    memcpy(f->shape, x->shape, sizeof(x->shape));
    f->data_offset = x->vox_offset;
    if (x->vox_offset > file_len || x->data_bytes > file_len - x->vox_offset) {
        SM_FAIL_AT(err, SM_E_DATA, n->path,
                   "the volume needs %" PRIu64 " bytes after byte %" PRIu64 ", %s %" PRIu64,
                   x->data_bytes, x->vox_offset,
                   n->gz ? "a gzip file of this size inflates to at most" : "the file has",
                   file_len);
    }
    f->swap = x->swap && sm_dtype_size(x->dtype) > 1;
    /* SPEC §2: scl_slope/scl_inter are applied, never ignored: the values become v * slope +
     * inter, computed in double and stored as float32 (float64 files stay float64) */
    f->scaled = x->scaled;
    f->slope = x->scl_slope;
    f->inter = isnan(x->scl_inter) ? 0.0 : x->scl_inter;
    f->dtype = !f->scaled ? x->dtype : x->dtype == SM_DT_FLOAT64 ? SM_DT_FLOAT64 : SM_DT_FLOAT32;
    return SM_OK;
}

/* A voxel size the output takes (OME `scale`, provenance) must be a positive finite number: NaN,
 * 0 or a negative size would write a scale OME-Zarr readers reject (JSON has no NaN). A caller
 * with its own spacing (input.spacing) takes the file whatever its pixdim. */
static sm_status check_spacing(const struct nifti *n, struct sm_err *err)
{
    for (unsigned d = 0; d < n->hdr.ndim; d++) {
        const double s = n->hdr.spacing[d];
        if (!isfinite(s) || s <= 0) {
            SM_ERR(err, SM_E_DATA,
                   "pixdim[%u] is %g: a voxel size must be a positive finite number "
                   "(input.spacing replaces the file's)",
                   n->hdr.ndim - d, s);
            sm_err_where(err, "%s: pixdim", n->path);
            return err->status;
        }
    }
    return SM_OK;
}

/* .nii.gz: the header through a zlib stream; the most the file can inflate to bounds the volume
 * before any payload is read (the stream itself is checked as it is read). */
static sm_status open_gz(struct nifti *n, struct sm_err *err)
{
    struct sm_gz *g;
    SM_TRY(sm_gz_open(n->path, &g, err));
    uint8_t h[SM_NIFTI_HEADER_BYTES];
    uint64_t got = 0;
    sm_status st = sm_gz_read(g, h, sizeof(h), &got, err);
    const uint64_t most = sm_gz_file_size(g) * SM_GZ_MAX_RATIO;
    sm_gz_close(g);
    return st == SM_OK ? take_header(n, h, (size_t)got, most, err) : st;
}

static sm_status open_nii(struct nifti *n, struct sm_err *err)
{
    SM_TRY(sm_src_open_file(n->path, false, &n->flat.fd, err));
    struct stat st;
    if (fstat(n->flat.fd, &st) != 0) {
        return SM_ERRNO(err, errno, n->path, "stat");
    }
    const uint64_t len = (uint64_t)st.st_size;
    uint8_t h[SM_NIFTI_HEADER_BYTES];
    if (len < sizeof(h)) {
        SM_FAIL_AT(err, SM_E_DATA, n->path,
                   "the file has %" PRIu64 " bytes, a NIfTI-1 header needs 348", len);
    }
    SM_TRY(sm_src_pread(n->flat.fd, 0, h, sizeof(h), n->path, err));
    return take_header(n, h, sizeof(h), len, err);
}

/* .nii.gz: inflates the stream once, keeping the axis-0 slabs of the box (the whole volume for
 * one rank); the rank that reads the volume's end checks the rest of the stream. */
static sm_status nifti_plan(void *user, const uint64_t *off, const uint64_t *shape,
                            uint64_t memory_bytes, struct sm_err *err)
{
    struct nifti *n = user;
    struct sm_flat *f = &n->flat;
    if (!n->gz || shape[0] == 0) {
        return SM_OK; /* pread reads any box; a rank without reads reads nothing */
    }
    uint64_t slab = sm_dtype_size(f->stored); /* bytes of one index of axis 0 */
    for (unsigned d = 1; d < f->ndim; d++) {
        slab *= f->shape[d];
    }
    const uint64_t first = f->data_offset + off[0] * slab, len = shape[0] * slab;
    if (len > memory_bytes) {
        SM_ERR_AT(err, SM_E_LIMIT, n->path,
                  "the %" PRIu64 " slabs of axis 0 this process reads inflate to %" PRIu64
                  " bytes, more than limits.memory_bytes (%" PRIu64
                  "); raise it, run more MPI ranks, or gunzip the file first",
                  shape[0], len, memory_bytes);
        return err->status;
    }
    sm_free(n->mem);
    f->mem = n->mem = sm_malloc(len > 0 ? (size_t)len : 1);
    f->mem_len = 0;
    if (n->mem == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %" PRIu64 " bytes for the inflated volume", len);
    }
    struct sm_gz *g;
    SM_TRY(sm_gz_open(n->path, &g, err));
    uint64_t got = 0;
    sm_status st = sm_gz_skip(g, first, err);
    if (st == SM_OK) {
        st = sm_gz_read(g, n->mem, len, &got, err);
    }
    if (st == SM_OK && got != len) {
        st = sm_gz_fail(g, err, "the file ends before the volume does");
    }
    if (st == SM_OK && off[0] + shape[0] == f->shape[0]) {
        st = sm_gz_finish(g, err); /* bytes after the volume are allowed, as in a .nii */
    }
    sm_source_count(n->self, sm_gz_bytes_in(g));
    sm_gz_close(g);
    if (st != SM_OK) {
        return st;
    }
    f->mem_base = first;
    f->mem_len = len;
    return SM_OK;
}

static sm_status nifti_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                                void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    const struct nifti *n = user;
    return sm_flat_read_box(&n->flat, off, shape, out, read, err);
}

static json_t *nifti_describe(void *user)
{
    const struct nifti *n = user;
    const struct sm_nifti_hdr *x = &n->hdr;
    struct sm_source_info info = {.ndim = x->ndim, .dtype = n->flat.dtype, .format = "nifti"};
    memcpy(info.shape, x->shape, sizeof(x->shape));
    json_t *o = sm_src_describe_file(n->path, &info);
    if (o == NULL) {
        return NULL;
    }
    /* pixdim[1..3] as the header stores them (x, y, z) */
    json_object_set_new(o, "pixdim",
                        json_pack("[f,f,f]", x->pixdim[0], x->pixdim[1], x->pixdim[2]));
    json_object_set_new(o, "xyzt_units", json_integer(x->xyzt_units));
    json_object_set_new(o, "qform_code", json_integer(x->qform_code));
    json_object_set_new(o, "sform_code", json_integer(x->sform_code));
    if (n->flat.scaled) {
        json_object_set_new(o, "scaling",
                            json_pack("{s:f,s:f,s:s}", "scl_slope", n->flat.slope, "scl_inter",
                                      n->flat.inter, "stored_dtype", sm_dtype_name(x->dtype)));
    }
    return o;
}

static void nifti_close(void *user)
{
    struct nifti *n = user;
    if (n->flat.fd >= 0) {
        close(n->flat.fd);
    }
    sm_free(n->mem);
    sm_free(n->path);
    sm_free(n);
}

static const struct sm_source_ops nifti_ops = {
    .plan = nifti_plan,
    .read_box = nifti_read_box,
    .describe = nifti_describe,
    .close = nifti_close,
};

/* Shape, type, the plane as the slab, and the geometry the header states: spacing per array axis,
 * the unit, and the world position of voxel 0 ([z, y, x] onto the last three axes). */
static void nifti_info(const struct nifti *n, struct sm_source_info *info)
{
    const struct sm_nifti_hdr *x = &n->hdr;
    memset(info, 0, sizeof(*info));
    snprintf(info->format, sizeof(info->format), "nifti");
    info->ndim = x->ndim;
    info->dtype = n->flat.dtype;
    for (unsigned d = 0; d < x->ndim; d++) {
        info->shape[d] = x->shape[d];
        info->slab[d] = d == 0 && x->ndim > 1 ? 1 : x->shape[d];
        info->spacing[d] = x->spacing[d];
    }
    /* .nii: pread, a box reads its own rows; .nii.gz: one stream inflated forward by plan */
    info->access = n->gz ? SM_SOURCE_STREAM : SM_SOURCE_RANDOM;
    info->spacing_set = true;
    info->unit = x->unit;
    info->origin_set = x->have_origin;
    for (int k = 0; x->have_origin && k < 3; k++) {
        const int a = (int)x->ndim - 3 + k;
        if (a >= 0) {
            info->origin[a] = x->origin[k];
        }
    }
}

sm_status sm_src_open_nifti(const struct sm_source_params *p, struct sm_source **out,
                            struct sm_err *err)
{
    *out = NULL;
    struct nifti *n = sm_calloc(1, sizeof(*n));
    if (n == NULL || (n->path = sm_src_strdup(p->path)) == NULL) {
        sm_free(n);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a NIfTI source");
    }
    n->flat.fd = -1;
    n->flat.path = n->path;
    n->gz = sm_src_ends_with(n->path, ".gz");
    sm_status st = n->gz ? open_gz(n, err) : open_nii(n, err);
    if (st == SM_OK && !p->spacing_given) {
        st = check_spacing(n, err);
    }
    struct sm_source_info info;
    nifti_info(n, &info);
    if (st == SM_OK) {
        st = sm_source_new(&nifti_ops, n, &info, out, err);
    }
    if (st != SM_OK) {
        nifti_close(n);
        return st;
    }
    n->self = *out;
    return SM_OK;
}
