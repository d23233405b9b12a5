/* The HDF5 export (export.h, SPEC §2 "Export", §6): a float32, uint8 or uint16 Zarr array (the
 * types a normalized convert writes) read back region by region
 * and written as one chunked HDF5 dataset, every rank writing its own boxes of one shared file
 * through parallel HDF5 (par_hdf5.h: MPI-IO + collective transfers with several ranks, sec2 with
 * one), plus auxiliary uint64 datasets and attributes. File: a temporary name beside the target,
 * renamed by rank 0 after every rank closed it.
 * Invariant: ranks agree (sm_par_agree) before every HDF5 call sequence that communicates, so they
 * all make the same collective calls in the same order, and the target path holds either nothing
 * new or the complete, closed file. Docs: docs/internals/export.md. */
#include "shardmill/sm_config.h"

#include "shardmill/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "export_int.h"
#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/dtype.h"
#include "shardmill/fs.h"
#include "shardmill/par.h"
#include "shardmill/par_hdf5.h"
#include "shardmill/path.h"

#define PATH_CAP 4096
#define CHUNK_BYTES_MAX ((uint64_t)UINT32_MAX) /* HDF5: a chunk is smaller than 4 GiB */

static const unsigned char h5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* This file is built into the module libshardmill_hdf5.so (export_int.h): its export.h functions
 * are hidden there and reached through this table. */
__attribute__((visibility("default"))) extern const struct sm_export_hdf5_ops sm_export_hdf5_module;
const struct sm_export_hdf5_ops sm_export_hdf5_module = {
    .head = {SM_MODULE_ABI, sizeof(struct sm_export_hdf5_ops)},
    .check = sm_export_hdf5_check,
    .write = sm_export_hdf5_write,
};

/* ---- HDF5 errors ---- */

struct h5_msg {
    char text[200];
};

/* The innermost entry of HDF5's error stack (where the failure began); its "error message = '...'"
 * (the errno text of a failed system call) is kept when present, the rest of the long description
 * (buffer addresses, sizes) dropped. */
static herr_t h5_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    struct h5_msg *m = data;
    if (n != 0 || e->desc == NULL) {
        return 0;
    }
    const char *em = strstr(e->desc, "error message = '");
    const char *colon = strchr(e->desc, ':');
    if (em != NULL) {
        em += strlen("error message = '");
        const char *q = strchr(em, '\'');
        const int head = colon != NULL ? (int)(colon - e->desc) : (int)strlen(e->desc);
        snprintf(m->text, sizeof(m->text), "%.*s: %.*s", head, e->desc,
                 q != NULL ? (int)(q - em) : (int)strlen(em), em);
    } else {
        snprintf(m->text, sizeof(m->text), "%s", e->desc);
    }
    return 0;
}

/* Records "CALL failed: <HDF5's innermost message>" with status st, `where` = the file. */
static sm_status h5_fail(struct sm_err *err, sm_status st, const char *where, const char *call,
                         const char *file, int line)
{
    struct h5_msg m = {{0}};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk, &m);
    H5Eclear2(H5E_DEFAULT);
    sm_err_set(err, st, file, line, "%s failed%s%s", call, m.text[0] != '\0' ? ": " : "", m.text);
    sm_err_cause(err, "hdf5", 0);
    sm_err_where(err, "%s", where);
    return err->status;
}
#define H5_FAIL(err, st, where, call) h5_fail((err), (st), (where), (call), __FILE__, __LINE__)

static sm_status check_names(const struct sm_export_spec *spec, struct sm_err *err);

/* ---- the path and the policy (local) ---- */

static bool is_hdf5_file(const char *path)
{
    unsigned char sig[sizeof(h5_signature)];
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return false;
    }
    const ssize_t n = pread(fd, sig, sizeof(sig), 0);
    close(fd);
    return n == (ssize_t)sizeof(sig) && memcmp(sig, h5_signature, sizeof(sig)) == 0;
}

/* The target against the policy: absent, or (OVERWRITE) a regular HDF5 file. */
static sm_status check_target(const char *path, enum sm_export_exists exists, struct sm_err *err)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        return errno == ENOENT ? SM_OK : SM_ERRNO(err, errno, path, "cannot stat the export");
    }
    if (S_ISLNK(sb.st_mode)) {
        SM_FAIL_AT(err, SM_E_USAGE, path,
                   "the export path is a symbolic link (give the file itself)");
    }
    if (S_ISDIR(sb.st_mode)) {
        SM_FAIL_AT(err, SM_E_USAGE, path, "the export path is a directory");
    }
    if (exists == SM_EXPORT_EXISTS_ERROR) {
        SM_FAIL_AT(err, SM_E_USAGE, path, "export exists (set export.hdf5.exists: overwrite)");
    }
    if (!S_ISREG(sb.st_mode) || !is_hdf5_file(path)) {
        SM_FAIL_AT(err, SM_E_USAGE, path,
                   "not an HDF5 file (no HDF5 signature): refusing to overwrite it");
    }
    return SM_OK;
}

/* The temporary name may hold a stale file of an interrupted run (replaced), nothing else. */
static sm_status check_tmp(const char *tmp, struct sm_err *err)
{
    struct stat sb;
    if (lstat(tmp, &sb) != 0) {
        return errno == ENOENT ? SM_OK
                               : SM_ERRNO(err, errno, tmp, "cannot stat the temporary file");
    }
    if (!S_ISREG(sb.st_mode)) {
        SM_FAIL_AT(err, SM_E_USAGE, tmp,
                   "the export's temporary name is taken by something that is not "
                   "a regular file");
    }
    return SM_OK;
}

/* `later`: a path the caller creates with its parents before the write (or NULL). */
static sm_status check_dir(const char *dir, const char *later, struct sm_err *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT && later != NULL && sm_path_is_within(later, dir)) {
            return SM_OK; /* created on the way to `later` (the Zarr output's parents) */
        }
        return SM_ERRNO(err, errno, dir, "the export directory is missing");
    }
    if (!S_ISDIR(sb.st_mode)) {
        return SM_ERRNO(err, ENOTDIR, dir, "the export directory is not a directory");
    }
    if (access(dir, W_OK | X_OK) != 0) {
        return SM_ERRNO(err, errno, dir, "cannot create files in the export directory");
    }
    return SM_OK;
}

struct names {
    char *path; /* resolved */
    char tmp[PATH_CAP], dir[PATH_CAP];
};

static sm_status resolve_names(const char *path, const struct sm_export_opts *opts,
                               struct names *nm, struct sm_err *err)
{
    static const struct sm_path_names pn = {"export.hdf5.path", "export", "file"};
    SM_TRY(sm_path_resolve(path, opts->base, &pn, &nm->path, err));
    SM_TRY(sm_fs_shared_tmp_name(nm->path, nm->tmp, sizeof(nm->tmp), err));
    return sm_export_dir_name(nm->path, nm->dir, sizeof(nm->dir), err);
}

sm_status sm_export_hdf5_check(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, char **resolved,
                               struct sm_err *err)
{
    *resolved = NULL;
    struct names nm = {0};
    sm_status st = spec != NULL ? check_names(spec, err) : SM_OK;
    if (st == SM_OK) {
        st = resolve_names(path, opts, &nm, err);
    }
    if (st == SM_OK) {
        st = check_target(nm.path, opts->exists, err);
    }
    if (st == SM_OK) {
        st = check_dir(nm.dir, opts->created_by_caller, err);
    }
    if (st == SM_OK) {
        st = check_tmp(nm.tmp, err);
    }
    if (st != SM_OK) {
        sm_free(nm.path);
        return st;
    }
    *resolved = nm.path;
    return SM_OK;
}

/* ---- the HDF5 objects ---- */

struct h5 {
    hid_t file, dset, fspace, dxpl;
    const char *where;  /* the temporary file, for messages */
    hid_t ftype, mtype; /* the dataset's type in the file (little-endian) and in memory */
};

/* The HDF5 types of the exported element types (predefined: never closed); false if none. */
static bool h5_types(enum sm_dtype dt, hid_t *ftype, hid_t *mtype)
{
    switch (dt) {
    case SM_DT_FLOAT32:
        *ftype = H5T_IEEE_F32LE;
        *mtype = H5T_NATIVE_FLOAT;
        return true;
    case SM_DT_UINT8:
        *ftype = H5T_STD_U8LE;
        *mtype = H5T_NATIVE_UINT8;
        return true;
    case SM_DT_UINT16:
        *ftype = H5T_STD_U16LE;
        *mtype = H5T_NATIVE_UINT16;
        return true;
    default:
        return false;
    }
}

static void h5_close_objects(struct h5 *h)
{
    if (h->fspace >= 0) {
        H5Sclose(h->fspace);
    }
    if (h->dset >= 0) {
        H5Dclose(h->dset);
    }
    if (h->dxpl >= 0) {
        H5Pclose(h->dxpl);
    }
    h->fspace = h->dset = h->dxpl = H5I_INVALID_HID;
    H5Eclear2(H5E_DEFAULT);
}

/* Collective with a shared file. Everything dirty goes to the file while it is still open, so a
 * write error (a full disk) is reported here with the file in a sane state; HDF5 1.10.8 cannot
 * recover from a metadata flush that fails inside H5Fclose (it crashes at exit when it tries to
 * close the file again). Open MPI's OMPIO even reports a collective data write that hit ENOSPC
 * as a success: this flush's metadata writes are what notices. docs/internals/export.md. */
static sm_status h5_flush(struct h5 *h, struct sm_err *err)
{
    if (H5Fflush(h->file, H5F_SCOPE_GLOBAL) < 0) {
        return H5_FAIL(err, SM_E_IO, h->where, "H5Fflush");
    }
    return SM_OK;
}

/* Collective with a shared file: every rank, after an agreement. */
static sm_status h5_close_file(struct h5 *h, struct sm_err *err)
{
    h5_close_objects(h);
    if (h->file < 0) {
        return SM_OK;
    }
    const herr_t rc = H5Fclose(h->file);
    h->file = H5I_INVALID_HID; /* whatever happened, never closed twice */
    if (rc < 0) {
        return H5_FAIL(err, SM_E_IO, h->where, "H5Fclose");
    }
    return SM_OK;
}

static sm_status create_file(struct h5 *h, const char *tmp, struct sm_err *err)
{
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        return H5_FAIL(err, SM_E_INTERNAL, tmp, "H5Pcreate(file access)");
    }
    sm_status st = sm_par_h5_fapl((int64_t)fapl, err);
    /* strong close: H5Fclose closes whatever an error path left open */
    if (st == SM_OK && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        st = H5_FAIL(err, SM_E_INTERNAL, tmp, "H5Pset_fclose_degree");
    }
    if (st == SM_OK) {
        h->file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        if (h->file < 0) {
            st = H5_FAIL(err, SM_E_IO, tmp, "H5Fcreate");
        }
    }
    H5Pclose(fapl);
    return st;
}

/* A scalar or 1-D dataspace. */
static hid_t attr_space(const struct sm_export_attr *a)
{
    if (!a->array) {
        return H5Screate(H5S_SCALAR);
    }
    const hsize_t n = (hsize_t)a->n;
    return H5Screate_simple(1, &n, NULL);
}

static sm_status write_attr(hid_t obj, const struct sm_export_attr *a, const char *where,
                            struct sm_err *err)
{
    hid_t ftype = H5I_INVALID_HID, mtype = H5I_INVALID_HID, own = H5I_INVALID_HID;
    const void *data = NULL;
    switch (a->kind) {
    case SM_EXPORT_ATTR_STRING:
        own = H5Tcopy(H5T_C_S1);
        if (own >= 0 &&
            (H5Tset_size(own, H5T_VARIABLE) < 0 || H5Tset_cset(own, H5T_CSET_UTF8) < 0)) {
            H5Tclose(own);
            own = H5I_INVALID_HID;
        }
        ftype = mtype = own;
        data = &a->str;
        break;
    case SM_EXPORT_ATTR_F64:
        ftype = H5T_IEEE_F64LE;
        mtype = H5T_NATIVE_DOUBLE;
        data = a->f64;
        break;
    case SM_EXPORT_ATTR_U64:
        ftype = H5T_STD_U64LE;
        mtype = H5T_NATIVE_UINT64;
        data = a->u64;
        break;
    }
    if (ftype < 0 || data == NULL || (a->array && a->n == 0)) {
        SM_FAIL(err, SM_E_INTERNAL, "attribute '%s' has no type or value", a->name);
    }
    sm_status st = SM_OK;
    const hid_t space = attr_space(a);
    const hid_t attr = space >= 0 ? H5Acreate2(obj, a->name, ftype, space, H5P_DEFAULT, H5P_DEFAULT)
                                  : H5I_INVALID_HID;
    if (attr < 0) {
        st = H5_FAIL(err, SM_E_IO, where, "H5Acreate2");
    } else if (H5Awrite(attr, mtype, data) < 0) {
        st = H5_FAIL(err, SM_E_IO, where, "H5Awrite");
    }
    if (attr >= 0) {
        H5Aclose(attr);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    if (own >= 0) {
        H5Tclose(own);
    }
    return st;
}

static sm_status write_attrs(hid_t obj, const struct sm_export_attr *attrs, size_t n,
                             const char *where, struct sm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        SM_TRY(write_attr(obj, &attrs[i], where, err));
    }
    return SM_OK;
}

/* A link-creation list that creates missing groups on the way ("/ct/volume"). */
static hid_t make_lcpl(void)
{
    const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl >= 0 && H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        H5Pclose(lcpl);
        return H5I_INVALID_HID;
    }
    return lcpl;
}

/* The main dataset: the source's type little-endian (h->ftype), chunked, fill value = the
 * source's (`fill`, one element), never filled (every value is written), optional deflate.
 * Collective with a shared file. */
static sm_status create_dataset(struct h5 *h, const struct sm_export_spec *spec, unsigned nd,
                                const uint64_t *shape, const uint64_t *chunk, const void *fill,
                                struct sm_err *err)
{
    hsize_t dims[SM_MAX_DIMS], cdims[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        dims[d] = (hsize_t)shape[d];
        cdims[d] = (hsize_t)chunk[d];
    }
    sm_status st = SM_OK;
    const hid_t space = H5Screate_simple((int)nd, dims, NULL);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hid_t lcpl = make_lcpl();
    if (space < 0 || dcpl < 0 || lcpl < 0) {
        st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Screate_simple/H5Pcreate");
    } else if (H5Pset_chunk(dcpl, (int)nd, cdims) < 0 ||
               H5Pset_fill_value(dcpl, h->ftype, fill) < 0 || /* LE bytes */
               H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) {
        st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Pset_chunk/H5Pset_fill_value");
    } else if (spec->deflate > 0 && H5Pset_deflate(dcpl, (unsigned)spec->deflate) < 0) {
        st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Pset_deflate");
    }
    /* No chunk cache: every H5Dwrite writes its chunks through (the boxes are whole units, so
     * with the default chunk shape there is nothing to merge), so a write error surfaces in the
     * H5Dwrite of its round and nothing is left to flush when an error path closes the file. */
    const hid_t dapl = st == SM_OK ? H5Pcreate(H5P_DATASET_ACCESS) : H5I_INVALID_HID;
    if (st == SM_OK && (dapl < 0 || H5Pset_chunk_cache(dapl, 0, 0, 1.0) < 0)) {
        st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Pset_chunk_cache");
    }
    if (st == SM_OK) {
        h->dset = H5Dcreate2(h->file, spec->dataset, h->ftype, space, lcpl, dcpl, dapl);
        if (h->dset < 0) {
            st = H5_FAIL(err, SM_E_IO, h->where, "H5Dcreate2");
        }
    }
    if (dapl >= 0) {
        H5Pclose(dapl);
    }
    if (st == SM_OK) {
        h->fspace = H5Dget_space(h->dset);
        h->dxpl = H5Pcreate(H5P_DATASET_XFER);
        if (h->fspace < 0 || h->dxpl < 0) {
            st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Dget_space/H5Pcreate");
        } else {
            st = sm_par_h5_dxpl((int64_t)h->dxpl, err);
        }
    }
    if (lcpl >= 0) {
        H5Pclose(lcpl);
    }
    if (dcpl >= 0) {
        H5Pclose(dcpl);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    return st;
}

/* An auxiliary dataset: uint64 [n], contiguous, written by rank 0 (the others select nothing in
 * the same collective write), then its attributes. Collective with a shared file. */
static sm_status write_aux(struct h5 *h, const struct sm_export_aux *x, struct sm_err *err)
{
    const hsize_t n = (hsize_t)x->n;
    const bool mine = sm_par_rank() == 0;
    sm_status st = SM_OK;
    const hid_t space = H5Screate_simple(1, &n, NULL);
    const hid_t mspace = H5Screate_simple(1, &n, NULL);
    const hid_t lcpl = make_lcpl();
    hid_t ds = H5I_INVALID_HID;
    if (space < 0 || mspace < 0 || lcpl < 0) {
        st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Screate_simple/H5Pcreate");
    } else {
        ds = H5Dcreate2(h->file, x->name, H5T_STD_U64LE, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        if (ds < 0) {
            st = H5_FAIL(err, SM_E_IO, h->where, "H5Dcreate2");
        }
    }
    if (st == SM_OK && !mine && (H5Sselect_none(space) < 0 || H5Sselect_none(mspace) < 0)) {
        st = H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Sselect_none");
    }
    if (st == SM_OK && H5Dwrite(ds, H5T_NATIVE_UINT64, mspace, space, h->dxpl, x->values) < 0) {
        st = H5_FAIL(err, SM_E_IO, h->where, "H5Dwrite");
    }
    if (st == SM_OK) {
        st = write_attrs(ds, x->attrs, x->nattrs, h->where, err);
    }
    if (ds >= 0) {
        H5Dclose(ds);
    }
    if (lcpl >= 0) {
        H5Pclose(lcpl);
    }
    if (mspace >= 0) {
        H5Sclose(mspace);
    }
    if (space >= 0) {
        H5Sclose(space);
    }
    return st;
}

/* One collective write: this rank's box, or nothing (box NULL). */
static sm_status write_box(struct h5 *h, unsigned nd, const struct sm_export_box *box,
                           const void *data, struct sm_err *err)
{
    static const float none = 0.0f; /* a valid pointer for an empty selection (any type) */
    hsize_t off[SM_MAX_DIMS], cnt[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        off[d] = box != NULL ? (hsize_t)box->off[d] : 0;
        cnt[d] = box != NULL ? (hsize_t)box->shape[d] : 1;
    }
    const hid_t mspace = H5Screate_simple((int)nd, cnt, NULL);
    herr_t rc = mspace < 0 ? -1 : 0;
    if (rc == 0 && box != NULL) {
        rc = H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, off, NULL, cnt, NULL);
    } else if (rc == 0) {
        rc = H5Sselect_none(h->fspace) < 0 || H5Sselect_none(mspace) < 0 ? -1 : 0;
    }
    /* the message is taken before any other HDF5 call: each one clears the error stack */
    sm_status st = rc < 0 ? H5_FAIL(err, SM_E_INTERNAL, h->where, "H5Sselect_hyperslab") : SM_OK;
    if (st == SM_OK && H5Dwrite(h->dset, h->mtype, mspace, h->fspace, h->dxpl,
                                box != NULL ? data : (const void *)&none) < 0) {
        st = H5_FAIL(err, SM_E_IO, h->where, "H5Dwrite");
    }
    if (mspace >= 0) {
        H5Sclose(mspace);
    }
    return st;
}

/* ---- rank 0's part of the finish: durability and the rename ---- */

/* The store protocol's helpers (core/core_fs.c): the file is the HDF5 library's, written to a
 * path, so only the durability and the rename are shared; `where` is the export path. */
static sm_status named(sm_status st, const char *path, struct sm_err *err)
{
    if (st != SM_OK) {
        sm_err_where(err, "%s", path);
    }
    return st;
}

static sm_status publish(const struct names *nm, const struct sm_export_opts *opts, uint64_t *bytes,
                         struct sm_err *err)
{
    /* the policy again: something may have appeared at the path during the run */
    SM_TRY(check_target(nm->path, opts->exists, err));
    if (opts->fsync) {
        SM_TRY(named(sm_fs_fsync(AT_FDCWD, nm->tmp, err), nm->tmp, err));
    }
    SM_TRY(named(sm_fs_rename(AT_FDCWD, nm->tmp, nm->path, err), nm->path, err));
    sm_status st = opts->fsync ? named(sm_fs_fsync(AT_FDCWD, nm->dir, err), nm->dir, err) : SM_OK;
    struct stat sb;
    if (st == SM_OK && stat(nm->path, &sb) != 0) {
        st = SM_ERRNO(err, errno, nm->path, "cannot stat the export");
    }
    if (st != SM_OK) {
        unlink(nm->path); /* the job fails: no export at the final name either */
        return st;
    }
    *bytes = (uint64_t)sb.st_size;
    return SM_OK;
}

/* ---- the collective write ---- */

/* The spec's names and level (what does not depend on the source). */
static sm_status check_names(const struct sm_export_spec *spec, struct sm_err *err)
{
    SM_TRY(sm_export_check_h5path(spec->dataset, "export.hdf5.dataset", err));
    const size_t dl = strlen(spec->dataset);
    for (size_t i = 0; i < spec->naux; i++) {
        const char *a = spec->aux[i].name;
        const size_t al = strlen(a);
        SM_TRY(sm_export_check_h5path(a, "export.hdf5.dataset", err));
        if (strcmp(a, spec->dataset) == 0 || (strncmp(a, spec->dataset, dl) == 0 && a[dl] == '/') ||
            (strncmp(spec->dataset, a, al) == 0 && spec->dataset[al] == '/')) {
            SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.dataset",
                       "'%s' collides with the dataset '%s' the export also writes", spec->dataset,
                       a);
        }
    }
    if (spec->deflate < 0 || spec->deflate > 9) {
        SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.deflate", "deflate level %d is not in 0..9",
                   spec->deflate);
    }
    return SM_OK;
}

/* Local validation of the spec against the source; fills the clipped chunk. */
static sm_status check_spec(const struct sm_export_spec *spec, const struct sm_array_meta *m,
                            const struct sm_export_work *work, uint64_t *chunk, struct sm_err *err)
{
    hid_t ft, mt;
    if (!h5_types(m->dtype, &ft, &mt) || m->ndim == 0) {
        SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.path",
                   "the HDF5 export writes float32, uint8 or uint16 arrays of at least one "
                   "dimension; the source is %s with %u",
                   sm_dtype_name(m->dtype), m->ndim);
    }
    SM_TRY(check_names(spec, err));
    uint64_t bytes = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        if (spec->chunk[d] == 0 || work->unit[d] == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.chunk", "extent 0 on axis %u", d);
        }
        chunk[d] = spec->chunk[d] < m->shape[d] ? spec->chunk[d] : m->shape[d];
        chunk[d] = chunk[d] > 0 ? chunk[d] : 1;
        bytes = bytes > CHUNK_BYTES_MAX ? bytes : bytes * chunk[d];
    }
    if (bytes >= CHUNK_BYTES_MAX) {
        SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.chunk",
                   "a chunk of %llu bytes: HDF5 chunks must be smaller than 4 GiB",
                   (unsigned long long)bytes);
    }
    return SM_OK;
}

static size_t box_bytes(const struct sm_array_meta *m, const struct sm_export_box *b)
{
    size_t n = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        n *= (size_t)b->shape[d];
    }
    return n;
}

struct plan {
    struct sm_export_box *boxes;
    size_t n;
    uint8_t *buf; /* the largest box's values */
    size_t cap;
};

static sm_status make_plan(const struct sm_export_spec *spec, const struct sm_array_meta *m,
                           const struct sm_export_work *work, struct plan *p, struct sm_err *err)
{
    uint64_t unit_bytes = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        unit_bytes *= work->unit[d];
    }
    /* One rank (sec2): one unit per box. HDF5's serial path gathers a memory selection that
     * spans many chunks chunk by chunk, slowly: one H5Dwrite of a 32 MiB box of 1024 chunks took
     * 225 ms here, the same values unit by unit 20 ms. Shared (MPI-IO): whole boxes, since each
     * box is a collective round and MPI-IO moves a box with derived datatypes (42 ms per rank
     * for 16 MiB). docs/internals/export.md. */
    uint64_t max_units = spec->buffer_bytes / unit_bytes > 0 ? spec->buffer_bytes / unit_bytes : 1;
    if (!sm_par_h5_shared()) {
        max_units = 1;
    }
    SM_TRY(sm_export_plan(m->ndim, m->shape, work->unit, work->first, work->count, max_units, NULL,
                          &p->n, err));
    if (p->n == 0) {
        return SM_OK;
    }
    p->boxes = sm_calloc(p->n, sizeof(*p->boxes));
    if (p->boxes == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %zu export boxes", p->n);
    }
    SM_TRY(sm_export_plan(m->ndim, m->shape, work->unit, work->first, work->count, max_units,
                          p->boxes, &p->n, err));
    for (size_t i = 0; i < p->n; i++) {
        const size_t b = box_bytes(m, &p->boxes[i]);
        p->cap = b > p->cap ? b : p->cap;
    }
    p->buf = sm_malloc(p->cap);
    if (p->buf == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an export buffer of %zu bytes", p->cap);
    }
    return SM_OK;
}

/* Every rank, in the same order: the dataset, its attributes, the auxiliary datasets. Agreement
 * after each step that may fail on one rank alone. */
static sm_status write_metadata(struct h5 *h, const struct sm_export_spec *spec,
                                const struct sm_array_meta *m, const uint64_t *chunk,
                                struct sm_err *err)
{
    const uint64_t to = spec->timeout_ms;
    SM_TRY(sm_par_agree_within(create_dataset(h, spec, m->ndim, m->shape, chunk, m->fill, err), to,
                               err));
    SM_TRY(sm_par_agree_within(write_attrs(h->dset, spec->attrs, spec->nattrs, h->where, err), to,
                               err));
    for (size_t i = 0; i < spec->naux; i++) {
        SM_TRY(sm_par_agree_within(write_aux(h, &spec->aux[i], err), to, err));
    }
    return SM_OK;
}

/* The write rounds: in round k every rank reads its k-th box (if it has one), all agree, then
 * all take part in one collective H5Dwrite (a rank without a box selects nothing), then all
 * agree again, with a deadline (a failed write may leave ranks inside MPI-IO). */
static sm_status write_rounds(struct h5 *h, struct sm_array *src, const struct plan *p,
                              uint64_t rounds, const struct sm_export_work *work,
                              uint64_t timeout_ms, struct sm_scratch *scratch,
                              struct sm_export_result *res, struct sm_err *err)
{
    const struct sm_array_meta *m = sm_array_meta(src);
    const unsigned nd = m->ndim;
    const size_t elem = sm_dtype_size(m->dtype);
    for (uint64_t k = 0; k < rounds; k++) {
        const struct sm_export_box *box = k < p->n ? &p->boxes[k] : NULL;
        sm_status local = sm_stop_check(work->stop, err); /* agreed below: every rank stops */
        if (box != NULL && local == SM_OK) {
            const uint64_t t0 = sm_clock_ns();
            local = sm_array_read_region(src, box->off, box->shape, p->buf, box_bytes(m, box),
                                         scratch, err);
            res->read_ns += sm_clock_ns() - t0;
        }
        SM_TRY(sm_par_agree(local, err));
        const uint64_t t0 = sm_clock_ns();
        local = write_box(h, nd, box, p->buf, err);
        res->write_ns += sm_clock_ns() - t0;
        res->rounds++;
        if (box != NULL && local == SM_OK) {
            res->boxes++;
            res->values += box_bytes(m, box) / elem;
        }
        SM_TRY(sm_par_agree_within(local, timeout_ms, err));
        if (work->progress != NULL) {
            work->progress(work->progress_user, res->values, res->values * elem);
        }
    }
    return SM_OK;
}

sm_status sm_export_hdf5_write(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, struct sm_array *src,
                               const struct sm_export_work *work, struct sm_scratch *scratch,
                               struct sm_export_result *res, struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    res->driver = sm_par_h5_driver();
    /* the engine never prints: HDF5's error stacks become err->what */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct sm_array_meta *m = sm_array_meta(src);
    struct names nm = {0};
    struct plan p = {0};
    struct h5 h = {H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID, NULL,
                   H5I_INVALID_HID, H5I_INVALID_HID};
    res->ndim = m->ndim;
    /* Local: names, spec, plan and buffer. */
    sm_status st = resolve_names(path, opts, &nm, err);
    if (st == SM_OK) {
        st = check_spec(spec, m, work, res->chunk, err);
    }
    if (st == SM_OK) {
        st = check_dir(nm.dir, NULL, err); /* it must exist by now */
    }
    if (st == SM_OK) {
        st = check_tmp(nm.tmp, err);
    }
    if (st == SM_OK) {
        st = make_plan(spec, m, work, &p, err);
    }
    st = sm_par_agree(st, err);
    uint64_t rounds = p.n;
    if (st == SM_OK) {
        st = sm_par_max_u64(&rounds, 1, err);
    }
    /* Collective from here: create, metadata, rounds, close. */
    const bool created = st == SM_OK;
    h.where = nm.tmp;
    (void)h5_types(m->dtype, &h.ftype, &h.mtype); /* check_spec refused any other type */
    if (st == SM_OK) {
        st = sm_par_agree_within(create_file(&h, nm.tmp, err), spec->timeout_ms, err);
    }
    if (st == SM_OK) {
        st = write_metadata(&h, spec, m, res->chunk, err);
    }
    if (st == SM_OK) {
        st = write_rounds(&h, src, &p, rounds, work, spec->timeout_ms, scratch, res, err);
    }
    const uint64_t t0 = sm_clock_ns();
    if (st == SM_OK) {
        st = sm_par_agree_within(h5_flush(&h, err), spec->timeout_ms, err);
    }
    if (st == SM_OK) {
        st = sm_par_agree_within(h5_close_file(&h, err), spec->timeout_ms, err);
    }
    /* Rank 0 publishes once every rank closed the file (the agreement above is that point). */
    uint64_t bytes = 0;
    if (st == SM_OK) {
        st = sm_par_agree(sm_par_rank() == 0 ? publish(&nm, opts, &bytes, err) : SM_OK, err);
    }
    if (st == SM_OK) {
        st = sm_par_bcast(&bytes, sizeof(bytes), 0, err);
        res->bytes = bytes;
    }
    res->finish_ns = sm_clock_ns() - t0;
    if (st != SM_OK && created && sm_par_stuck()) {
        /* No collective is possible any more (the caller aborts the job): whichever rank saw it
         * removes the temporary file, since rank 0 may be the one that is stuck. */
        unlink(nm.tmp);
    } else if (st != SM_OK && created) {
        /* Every rank is here after the same agreed failure. The file is garbage: rank 0 first
         * truncates it, so that closing it (HDF5 still writes its metadata) does not run into
         * the full disk that may have caused the failure; then all close it together, then rank
         * 0 removes it. */
        if (sm_par_rank() == 0 && h.file >= 0) {
            (void)truncate(nm.tmp, 0);
        }
        sm_par_barrier();
        struct sm_err ignored;
        sm_err_clear(&ignored);
        h5_close_file(&h, &ignored);
        H5Eclear2(H5E_DEFAULT);
        sm_par_barrier();
        if (sm_par_rank() == 0) {
            unlink(nm.tmp);
        }
    }
    sm_free(p.boxes);
    sm_free(p.buf);
    sm_free(nm.path);
    return st;
}
