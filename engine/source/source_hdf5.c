/* The HDF5 dataset reader (source_hdf5_int.h): the module libshardmill_h5source.so, reached
 * through its one table (sm_hdf5_source_module). A box is one hyperslab:
 * H5Sselect_hyperslab on the file space, a simple memory space of the box's shape, and H5Dread
 * into the native type of the stored class, size and sign (HDF5 swaps the bytes of a big-endian
 * type and runs the chunk filters). Debian's HDF5 (hdf5-openmpi 1.10) is built without
 * --enable-threadsafe: every HDF5 call below holds h5_lock, so the threads of a rank read one
 * hyperslab at a time; MPI ranks (each its own process and handle) give the parallelism. A gzip
 * dataset in its native type takes source_hdf5_raw.c's path instead: only the fetch of each
 * chunk's stored bytes holds the lock, its inflate does not. */
#include "shardmill/sm_config.h"

#include "source_hdf5_int.h"
#include "source_hdf5_raw.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "shardmill/alloc.h"

static sm_status h5_open(const char *path, const char *dataset, unsigned flags,
                         struct sm_h5source_info *info, struct sm_h5source **out,
                         struct sm_err *err);
static sm_status h5_read_box(struct sm_h5source *s, const uint64_t *off, const uint64_t *shape,
                             void *out, uint64_t *read, struct sm_err *err);
static void h5_close(struct sm_h5source *s);

/* The one symbol of this file the module exports (every other is hidden). */
__attribute__((visibility("default"))) extern const struct sm_hdf5_source_ops sm_hdf5_source_module;
const struct sm_hdf5_source_ops sm_hdf5_source_module = {
    .head = {SM_MODULE_ABI, sizeof(struct sm_hdf5_source_ops)},
    .open = h5_open,
    .read_box = h5_read_box,
    .close = h5_close,
};

/* HDF5 is not thread-safe in Debian's build: one lock for every call of the library here. */
static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

/* Refuses every external link HDF5 would traverse (input.hdf5.allow_external false): set on the
 * access plist of every lookup, so a link reached through a soft link is caught as well. The first
 * refused link is kept for the error message. */
struct elink_guard {
    bool allow;
    bool hit;
    char file[256], object[256];
};

struct sm_h5source {
    hid_t file, dset, mtype; /* mtype: a predefined native type (never closed) */
    hid_t dapl;              /* every lookup's access plist: the guard, ${ORIGIN} external files */
    struct elink_guard guard;
    struct sm_h5raw raw; /* gzip chunks inflated outside the lock (source_hdf5_raw.c) */
    unsigned ndim;
    /* what a read fetches from the file (h5_fetched): chunked (chunk[0] != 0) with or without
     * filters, else contiguous; the stored value's bytes */
    uint64_t chunk[SM_MAX_DIMS];
    bool filtered;
    size_t elem;
    char where[512]; /* "<file>: <dataset>" */
};

struct src_msg {
    char text[200];
};

/* The innermost message of HDF5's error stack. */
static herr_t src_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    struct src_msg *m = data;
    if (n == 0 && e->desc != NULL) {
        snprintf(m->text, sizeof(m->text), "%s", e->desc);
    }
    return 0;
}

static sm_status src_fail(struct sm_err *err, const char *where, const char *call, const char *file,
                          int line)
{
    struct src_msg m = {{0}};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, src_walk, &m);
    H5Eclear2(H5E_DEFAULT);
    sm_err_set(err, SM_E_DATA, file, line, "%s failed%s%s", call, m.text[0] != '\0' ? ": " : "",
               m.text);
    sm_err_cause(err, "hdf5", 0);
    sm_err_where(err, "%s", where);
    return err->status;
}
#define SRC_FAIL(err, where, call) src_fail((err), (where), (call), __FILE__, __LINE__)

static herr_t elink_refuse(const char *parent_file, const char *parent_group,
                           const char *child_file, const char *child_object, unsigned *acc_flags,
                           hid_t fapl, void *data)
{
    (void)parent_file, (void)parent_group, (void)acc_flags, (void)fapl;
    struct elink_guard *g = data;
    if (g->allow) {
        return 0;
    }
    if (!g->hit) {
        g->hit = true;
        snprintf(g->file, sizeof(g->file), "%s", child_file);
        snprintf(g->object, sizeof(g->object), "%s", child_object);
    }
    return -1;
}

static sm_status elink_fail(struct sm_err *err, const char *where, const char *name,
                            const struct elink_guard *g)
{
    H5Eclear2(H5E_DEFAULT);
    SM_FAIL_AT(err, SM_E_DATA, where,
               "the path %s leads through an external link (to %s:%s), outside the input file "
               "(input.hdf5.allow_external: true follows it)",
               name, g->file, g->object);
}

static const char *class_name(H5T_class_t c)
{
    switch (c) {
    case H5T_INTEGER:
        return "integer";
    case H5T_FLOAT:
        return "float";
    case H5T_TIME:
        return "time";
    case H5T_STRING:
        return "string";
    case H5T_BITFIELD:
        return "bitfield";
    case H5T_OPAQUE:
        return "opaque";
    case H5T_COMPOUND:
        return "compound";
    case H5T_REFERENCE:
        return "reference";
    case H5T_ENUM:
        return "enum";
    case H5T_VLEN:
        return "variable-length";
    case H5T_ARRAY:
        return "array";
    default:
        return "unknown";
    }
}

/* The stored type -> the dtype delivered and the native memory type HDF5 converts to. */
static sm_status map_type(hid_t t, struct sm_h5source_info *info, hid_t *mtype, const char *where,
                          struct sm_err *err)
{
    const H5T_class_t cls = H5Tget_class(t);
    const size_t size = H5Tget_size(t);
    const bool big = H5Tget_order(t) == H5T_ORDER_BE;
    char what[160];
    if (cls == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8)) {
        const bool sign = H5Tget_sign(t) == H5T_SGN_2;
        static const enum sm_dtype sdt[] = {SM_DT_INT8, SM_DT_INT16, 0, SM_DT_INT32,
                                            0,          0,           0, SM_DT_INT64};
        static const enum sm_dtype udt[] = {SM_DT_UINT8, SM_DT_UINT16, 0, SM_DT_UINT32, 0, 0,
                                            0,           SM_DT_UINT64};
        info->dtype = sign ? sdt[size - 1] : udt[size - 1];
        *mtype = size == 1   ? (sign ? H5T_NATIVE_SCHAR : H5T_NATIVE_UCHAR)
                 : size == 2 ? (sign ? H5T_NATIVE_SHORT : H5T_NATIVE_USHORT)
                 : size == 4 ? (sign ? H5T_NATIVE_INT : H5T_NATIVE_UINT)
                             : (sign ? H5T_NATIVE_LLONG : H5T_NATIVE_ULLONG);
    } else if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
        info->dtype = size == 4 ? SM_DT_FLOAT32 : SM_DT_FLOAT64;
        *mtype = size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    } else {
        snprintf(what, sizeof(what),
                 "unsupported data type: %s of %zu bytes (integers of 1, 2, 4 or 8 bytes and "
                 "floats of 4 or 8 bytes are read)",
                 class_name(cls), size);
        SM_FAIL_AT(err, SM_E_DATA, where, "%s", what);
    }
    snprintf(info->stored, sizeof(info->stored), "%s%s", sm_dtype_name(info->dtype),
             size > 1 ? (big ? " big-endian" : " little-endian") : "");
    return SM_OK;
}

/* Layout and filters; a filter the library cannot run is refused by name. */
static sm_status check_plist(hid_t dset, struct sm_h5source_info *info, const char *where,
                             struct sm_err *err)
{
    const hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0) {
        return SRC_FAIL(err, where, "H5Dget_create_plist");
    }
    const H5D_layout_t lay = H5Pget_layout(dcpl);
    hsize_t chunk[H5S_MAX_RANK];
    if (lay == H5D_CHUNKED && H5Pget_chunk(dcpl, (int)info->ndim, chunk) == (int)info->ndim) {
        for (unsigned d = 0; d < info->ndim; d++) {
            info->chunk[d] = chunk[d];
        }
    }
    snprintf(info->layout, sizeof(info->layout), "%s",
             lay == H5D_CHUNKED   ? "chunked"
             : lay == H5D_COMPACT ? "compact"
             : lay == H5D_VIRTUAL ? "virtual"
                                  : "contiguous");
    const int n = H5Pget_nfilters(dcpl);
    sm_status st = SM_OK;
    size_t used = 0;
    for (int i = 0; i < n && st == SM_OK; i++) {
        unsigned flags = 0, conf = 0;
        size_t nvals = 0;
        char name[64] = "";
        const H5Z_filter_t id =
            H5Pget_filter2(dcpl, (unsigned)i, &flags, &nvals, NULL, sizeof(name), name, &conf);
        if (id < 0) {
            st = SRC_FAIL(err, where, "H5Pget_filter2");
            break;
        }
        if (name[0] == '\0') {
            snprintf(name, sizeof(name), "filter %d", (int)id);
        }
        const int n2 = snprintf(info->filters + used, sizeof(info->filters) - used, "%s%s",
                                used > 0 ? "," : "", name);
        if (n2 > 0 && (size_t)n2 < sizeof(info->filters) - used) {
            used += (size_t)n2;
        }
        const htri_t avail = H5Zfilter_avail(id);
        H5Eclear2(H5E_DEFAULT);
        if (avail <= 0 || (H5Zget_filter_info(id, &conf) >= 0 &&
                           (conf & H5Z_FILTER_CONFIG_DECODE_ENABLED) == 0)) {
            char what[200];
            snprintf(what, sizeof(what),
                     "the dataset uses the HDF5 filter '%s' (id %d), which this HDF5 library "
                     "cannot decode",
                     name, (int)id);
            st = SM_ERR_AT(err, SM_E_DATA, where, "%s", what);
        }
    }
    H5Pclose(dcpl);
    return st;
}

/* Every component of `dataset` must exist (else the first missing one is named) and none may be
 * reached through a refused external link. With `must_exist` false a missing component ends the
 * walk quietly (a virtual dataset's source may be absent: HDF5 reads its fill value). */
static sm_status walk_path(const struct sm_h5source *s, const char *dataset, bool must_exist,
                           struct sm_err *err)
{
    const hid_t file = s->file;
    const char *where = s->where;
    char prefix[512];
    const size_t len = strlen(dataset);
    if (len >= sizeof(prefix)) {
        SM_FAIL_AT(err, SM_E_DATA, where, "the dataset path is too long");
    }
    for (size_t i = 1; i <= len; i++) {
        if (i < len && dataset[i] != '/') {
            continue;
        }
        memcpy(prefix, dataset, i);
        prefix[i] = '\0';
        const htri_t ok = H5Lexists(file, prefix, s->dapl);
        H5Eclear2(H5E_DEFAULT);
        htri_t obj = ok > 0 && !s->guard.hit ? H5Oexists_by_name(file, prefix, s->dapl) : 0;
        H5Eclear2(H5E_DEFAULT);
        if (s->guard.hit) {
            return elink_fail(err, where, prefix, &s->guard);
        }
        if ((ok <= 0 || obj <= 0) && !must_exist) {
            return SM_OK;
        }
        if (ok <= 0 || obj <= 0) {
            char what[600];
            if (i == len) {
                snprintf(what, sizeof(what), "no dataset %s in the file", dataset);
            } else {
                snprintf(what, sizeof(what), "no dataset %s in the file (%s does not exist)",
                         dataset, prefix);
            }
            SM_FAIL_AT(err, SM_E_DATA, where, "%s", what);
        }
    }
    return SM_OK;
}

static sm_status walk_path(const struct sm_h5source *s, const char *dataset, bool must_exist,
                           struct sm_err *err);
static sm_status check_outside(struct sm_h5source *s, hid_t dset, const char *name, unsigned depth,
                               struct sm_err *err);

/* Virtual datasets nest (a source in the same file may be virtual itself): this deep is checked. */
#define VDS_DEPTH 8

/* The sources of a virtual dataset: a file other than "." (the dataset's own file) is refused; a
 * source dataset in the same file is walked (no external link on its path) and checked itself. */
static sm_status check_virtual(struct sm_h5source *s, hid_t dcpl, const char *name, unsigned depth,
                               struct sm_err *err)
{
    size_t n = 0;
    if (H5Pget_virtual_count(dcpl, &n) < 0) {
        return SRC_FAIL(err, s->where, "H5Pget_virtual_count");
    }
    for (size_t i = 0; i < n; i++) {
        char file[256], dset[256], what[700];
        const ssize_t fl = H5Pget_virtual_filename(dcpl, i, file, sizeof(file));
        const ssize_t dl = H5Pget_virtual_dsetname(dcpl, i, dset, sizeof(dset));
        if (fl < 0 || dl < 0) {
            return SRC_FAIL(err, s->where, "H5Pget_virtual_filename");
        }
        if ((size_t)dl >= sizeof(dset)) { /* a cut name could not be checked for links */
            snprintf(what, sizeof(what),
                     "%s is a virtual dataset whose source name is longer than %zu bytes", name,
                     sizeof(dset) - 1);
            SM_FAIL_AT(err, SM_E_DATA, s->where, "%s", what);
        }
        if (strcmp(file, ".") != 0) {
            snprintf(what, sizeof(what),
                     "%s is a virtual dataset with a source in the file %s%s (%s), outside the "
                     "input file (input.hdf5.allow_external: true reads it)",
                     name, file, (size_t)fl >= sizeof(file) ? "..." : "", dset);
            SM_FAIL_AT(err, SM_E_DATA, s->where, "%s", what);
        }
        if (depth >= VDS_DEPTH) {
            snprintf(what, sizeof(what),
                     "%s: virtual datasets nested more than %d deep are not read", name, VDS_DEPTH);
            SM_FAIL_AT(err, SM_E_DATA, s->where, "%s", what);
        }
        SM_TRY(walk_path(s, dset, false, err));
        const htri_t there =
            H5Lexists(s->file, dset, s->dapl) > 0 && H5Oexists_by_name(s->file, dset, s->dapl) > 0;
        H5Eclear2(H5E_DEFAULT);
        const hid_t obj = there ? H5Oopen(s->file, dset, s->dapl) : H5I_INVALID_HID;
        H5Eclear2(H5E_DEFAULT);
        sm_status st = SM_OK;
        if (obj >= 0 && H5Iget_type(obj) == H5I_DATASET) {
            st = check_outside(s, obj, dset, depth + 1, err);
        }
        if (obj >= 0) {
            H5Oclose(obj);
        }
        SM_TRY(st);
    }
    return SM_OK;
}

/* Data outside the input file, refused unless input.hdf5.allow_external: external storage (raw
 * data in other files, H5Pset_external) and virtual datasets with a source in another file. */
static sm_status check_outside(struct sm_h5source *s, hid_t dset, const char *name, unsigned depth,
                               struct sm_err *err)
{
    if (s->guard.allow) {
        return SM_OK;
    }
    const hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0) {
        return SRC_FAIL(err, s->where, "H5Dget_create_plist");
    }
    sm_status st = SM_OK;
    const int next = H5Pget_external_count(dcpl);
    if (next > 0) {
        char file[256] = "", what[700];
        off_t off = 0;
        hsize_t size = 0;
        if (H5Pget_external(dcpl, 0, sizeof(file), file, &off, &size) < 0) {
            H5Eclear2(H5E_DEFAULT);
        }
        snprintf(what, sizeof(what),
                 "%s uses external storage: its data lies in %d external file%s (%s%s), outside "
                 "the input file (input.hdf5.allow_external: true reads it)",
                 name, next, next > 1 ? "s" : "", file, next > 1 ? ", ..." : "");
        st = SM_ERR_AT(err, SM_E_DATA, s->where, "%s", what);
    } else if (H5Pget_layout(dcpl) == H5D_VIRTUAL) {
        st = check_virtual(s, dcpl, name, depth, err);
    }
    H5Pclose(dcpl);
    return st;
}

/* The access plist of every lookup and of the dataset: the external-link guard, and external
 * storage files named relative to the HDF5 file's directory (HDF5 1.10 takes the working
 * directory otherwise). */
static sm_status make_dapl(struct sm_h5source *s, struct sm_err *err)
{
    s->dapl = H5Pcreate(H5P_DATASET_ACCESS);
    /* no chunk cache: a chunk is read from the file for every box that needs it, which is what
     * the engine plans and counts (each block once per pass, docs/internals/reading.md); with a
     * cache, an unfiltered chunk of up to 1 MiB would be read whole for a box that needs a part */
    if (s->dapl < 0 || H5Pset_elink_cb(s->dapl, elink_refuse, &s->guard) < 0 ||
        H5Pset_efile_prefix(s->dapl, "${ORIGIN}") < 0 ||
        H5Pset_chunk_cache(s->dapl, 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
        return SRC_FAIL(err, s->where, "H5Pcreate");
    }
    return SM_OK;
}

/* The numeric attribute `name` of dset as n doubles; false when it is absent or not n numbers. */
static bool f64_attr(hid_t dset, const char *name, unsigned n, double *out)
{
    if (H5Aexists(dset, name) <= 0) {
        return false;
    }
    const hid_t a = H5Aopen(dset, name, H5P_DEFAULT);
    const hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    const hid_t sp = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    const H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    const bool ok = sp >= 0 && (cls == H5T_FLOAT || cls == H5T_INTEGER) &&
                    H5Sget_simple_extent_npoints(sp) == (hssize_t)n &&
                    H5Aread(a, H5T_NATIVE_DOUBLE, out) >= 0;
    if (sp >= 0) {
        H5Sclose(sp);
    }
    if (t >= 0) {
        H5Tclose(t);
    }
    if (a >= 0) {
        H5Aclose(a);
    }
    return ok;
}

/* The scalar string attribute `name` of dset (fixed or variable length) into buf; false when
 * it is absent, not one string or does not fit. */
static bool str_attr(hid_t dset, const char *name, char *buf, size_t cap)
{
    if (H5Aexists(dset, name) <= 0) {
        return false;
    }
    const hid_t a = H5Aopen(dset, name, H5P_DEFAULT);
    const hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    const hid_t sp = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    bool ok =
        sp >= 0 && t >= 0 && H5Tget_class(t) == H5T_STRING && H5Sget_simple_extent_npoints(sp) == 1;
    const hid_t mt = ok ? H5Tcopy(H5T_C_S1) : H5I_INVALID_HID;
    ok = ok && mt >= 0 && H5Tset_cset(mt, H5Tget_cset(t)) >= 0; /* no ASCII <-> UTF-8 conversion */
    if (ok && H5Tis_variable_str(t) > 0) {
        char *v = NULL;
        ok = mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Aread(a, mt, &v) >= 0 &&
             v != NULL && strlen(v) < cap;
        if (ok) {
            snprintf(buf, cap, "%s", v);
        }
        if (v != NULL) {
            H5free_memory(v);
        }
    } else if (ok) {
        const size_t len = H5Tget_size(t);
        ok = mt >= 0 && len > 0 && len < cap && H5Tset_size(mt, len + 1) >= 0 &&
             H5Tset_strpad(mt, H5T_STR_NULLTERM) >= 0 && H5Aread(a, mt, buf) >= 0;
    }
    if (mt >= 0) {
        H5Tclose(mt);
    }
    if (sp >= 0) {
        H5Sclose(sp);
    }
    if (t >= 0) {
        H5Tclose(t);
    }
    if (a >= 0) {
        H5Aclose(a);
    }
    return ok;
}

/* The geometry the dataset's attributes state (the HDF5 export's spacing, origin and unit). */
static void read_geometry(hid_t dset, struct sm_h5source_info *info)
{
    info->spacing_set = f64_attr(dset, "spacing", info->ndim, info->spacing);
    for (unsigned d = 0; info->spacing_set && d < info->ndim; d++) {
        info->spacing_set = isfinite(info->spacing[d]) && info->spacing[d] > 0;
    }
    info->origin_set = f64_attr(dset, "origin", info->ndim, info->origin);
    for (unsigned d = 0; info->origin_set && d < info->ndim; d++) {
        info->origin_set = isfinite(info->origin[d]);
    }
    if (!str_attr(dset, "unit", info->unit, sizeof(info->unit))) {
        info->unit[0] = '\0';
    }
    H5Eclear2(H5E_DEFAULT);
}

static sm_status open_locked(const char *path, const char *dataset, struct sm_h5source_info *info,
                             struct sm_h5source *s, struct sm_err *err)
{
    /* the engine never prints: HDF5's error stacks become err->what */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* without blocking: a FIFO would hang the open, and HDF5's own open after it (issue 32 item 9)
     */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        SM_ERR(err, SM_E_DATA, "cannot open the HDF5 file: %s", strerror(e));
        sm_err_cause(err, "errno", e);
        sm_err_where(err, "%s", s->where);
        return err->status;
    }
    close(fd);
    if (!S_ISREG(sb.st_mode)) {
        SM_FAIL_AT(err, SM_E_DATA, s->where, "is %s, not a regular file",
                   S_ISFIFO(sb.st_mode)  ? "a FIFO (named pipe)"
                   : S_ISDIR(sb.st_mode) ? "a directory"
                                         : "a device or socket");
    }
    const htri_t is = H5Fis_hdf5(path);
    H5Eclear2(H5E_DEFAULT);
    if (is <= 0) {
        SM_FAIL_AT(err, SM_E_DATA, s->where, "not an HDF5 file");
    }
    /* no sieve buffer: a box of contiguous data (or of an unfiltered chunk) reads its own rows,
     * not the 64 KiB windows around them (a quarter-width box read the whole plane) */
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_sieve_buf_size(fapl, 0) < 0) {
        if (fapl >= 0) {
            H5Pclose(fapl);
        }
        return SRC_FAIL(err, s->where, "H5Pset_sieve_buf_size");
    }
    s->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (s->file < 0) {
        return SRC_FAIL(err, s->where, "H5Fopen");
    }
    if (dataset == NULL || dataset[0] != '/' || dataset[1] == '\0') {
        SM_FAIL_AT(err, SM_E_DATA, s->where,
                   "the dataset must be an absolute HDF5 path such as /data");
    }
    SM_TRY(make_dapl(s, err));
    SM_TRY(walk_path(s, dataset, true, err));
    const hid_t obj = H5Oopen(s->file, dataset, s->dapl);
    if (obj < 0) {
        return SRC_FAIL(err, s->where, "H5Oopen");
    }
    const bool is_dset = H5Iget_type(obj) == H5I_DATASET;
    H5Oclose(obj);
    if (!is_dset) {
        SM_FAIL_AT(err, SM_E_DATA, s->where,
                   "the object is not a dataset (a group or a named type)");
    }
    /* H5Dopen2, not the H5Oopen above: only it takes the dataset access plist (efile prefix) */
    s->dset = H5Dopen2(s->file, dataset, s->dapl);
    if (s->dset < 0) {
        return SRC_FAIL(err, s->where, "H5Dopen2");
    }
    const hid_t t = H5Dget_type(s->dset);
    if (t < 0) {
        return SRC_FAIL(err, s->where, "H5Dget_type");
    }
    sm_status st = map_type(t, info, &s->mtype, s->where, err);
    H5Tclose(t);
    SM_TRY(st);
    const hid_t space = H5Dget_space(s->dset);
    if (space < 0) {
        return SRC_FAIL(err, s->where, "H5Dget_space");
    }
    const int nd = H5Sget_simple_extent_ndims(space);
    hsize_t dims[H5S_MAX_RANK];
    if (H5Sget_simple_extent_type(space) != H5S_SIMPLE || nd < 1) {
        st = SM_ERR_AT(err, SM_E_DATA, s->where, "the dataset is scalar or empty (no axes)");
    } else if (nd > SM_MAX_DIMS) {
        char what[80];
        snprintf(what, sizeof(what), "the dataset has %d axes, at most %d are read", nd,
                 SM_MAX_DIMS);
        st = SM_ERR_AT(err, SM_E_DATA, s->where, "%s", what);
    } else {
        H5Sget_simple_extent_dims(space, dims, NULL);
        info->ndim = (unsigned)nd;
        for (int d = 0; d < nd && st == SM_OK; d++) {
            info->shape[d] = dims[d];
            if (dims[d] == 0) {
                st = SM_ERR_AT(err, SM_E_DATA, s->where,
                               "the dataset is empty (an axis of length 0)");
            }
        }
    }
    H5Sclose(space);
    SM_TRY(st);
    s->ndim = info->ndim;
    SM_TRY(check_plist(s->dset, info, s->where, err));
    SM_TRY(check_outside(s, s->dset, dataset, 0, err));
    read_geometry(s->dset, info);
    (void)sm_h5raw_plan(s->dset, s->mtype, s->ndim, &s->raw);
    memcpy(s->chunk, info->chunk, sizeof(s->chunk));
    s->filtered = info->filters[0] != '\0';
    s->elem = H5Tget_size(s->mtype); /* the stored size: the native type matches it */
    return SM_OK;
}

static void close_locked(struct sm_h5source *s)
{
    if (s->dset >= 0) {
        H5Dclose(s->dset);
    }
    if (s->dapl >= 0) {
        H5Pclose(s->dapl);
    }
    if (s->file >= 0) {
        H5Fclose(s->file);
    }
    H5Eclear2(H5E_DEFAULT);
}

static sm_status h5_open(const char *path, const char *dataset, unsigned flags,
                         struct sm_h5source_info *info, struct sm_h5source **out,
                         struct sm_err *err)
{
    *out = NULL;
    memset(info, 0, sizeof(*info));
    struct sm_h5source *s = sm_calloc(1, sizeof(*s));
    if (s == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an HDF5 source");
    }
    s->file = s->dset = s->dapl = H5I_INVALID_HID;
    s->guard.allow = (flags & SM_H5SOURCE_ALLOW_EXTERNAL) != 0;
    snprintf(s->where, sizeof(s->where), "%s: %s", path, dataset != NULL ? dataset : "");
    pthread_mutex_lock(&h5_lock);
    const sm_status st = open_locked(path, dataset, info, s, err);
    if (st != SM_OK) {
        close_locked(s);
    }
    pthread_mutex_unlock(&h5_lock);
    if (st != SM_OK) {
        sm_free(s);
        return st;
    }
    *out = s;
    return SM_OK;
}

/* The bytes H5Dread fetches from the file for the box [off, off + shape) (under the lock): of a
 * chunked dataset, for every chunk the box touches that is stored, its stored bytes when filtered
 * (it decodes whole) or the box's part of it when not; of contiguous (or compact, virtual) data
 * the box's bytes. Exact with the chunk cache and the sieve buffer off (open_locked). */
static uint64_t h5_fetched(const struct sm_h5source *s, const uint64_t *off, const uint64_t *shape)
{
    uint64_t n = s->elem;
    if (s->chunk[0] == 0) {
        for (unsigned d = 0; d < s->ndim; d++) {
            n *= shape[d];
        }
        return n;
    }
    uint64_t first[SM_MAX_DIMS], last[SM_MAX_DIMS], ci[SM_MAX_DIMS], sum = 0;
    for (unsigned d = 0; d < s->ndim; d++) {
        first[d] = ci[d] = off[d] / s->chunk[d];
        last[d] = (off[d] + shape[d] - 1) / s->chunk[d];
    }
    for (bool more = true; more;) {
        hsize_t coff[SM_MAX_DIMS];
        uint64_t part = s->elem;
        for (unsigned d = 0; d < s->ndim; d++) {
            coff[d] = ci[d] * s->chunk[d];
            const uint64_t lo = off[d] > coff[d] ? off[d] : coff[d];
            const uint64_t end = off[d] + shape[d], cend = coff[d] + s->chunk[d];
            part *= (end < cend ? end : cend) - lo;
        }
        hsize_t stored = 0;
        if (H5Dget_chunk_storage_size(s->dset, coff, &stored) < 0) {
            stored = 0; /* never written: the fill value, nothing read */
        }
        sum += stored == 0 ? 0 : s->filtered ? (uint64_t)stored : part;
        more = false; /* the next chunk in C order, if any */
        for (unsigned d = s->ndim; d-- > 0 && !more;) {
            more = ci[d] < last[d];
            ci[d] = more ? ci[d] + 1 : first[d];
        }
    }
    H5Eclear2(H5E_DEFAULT);
    return sum;
}

static sm_status h5_read_box(struct sm_h5source *s, const uint64_t *off, const uint64_t *shape,
                             void *out, uint64_t *read, struct sm_err *err)
{
    hsize_t start[SM_MAX_DIMS], count[SM_MAX_DIMS];
    for (unsigned d = 0; d < s->ndim; d++) {
        start[d] = off[d];
        count[d] = shape[d];
        if (shape[d] == 0) {
            return SM_OK;
        }
    }
    if (s->raw.on) {
        bool fallback;
        const sm_status rst =
            sm_h5raw_read_box(&s->raw, s->dset, &h5_lock, off, shape, out, &fallback, read, err);
        if (rst != SM_OK) {
            sm_err_where(err, "%s", s->where); /* the file and dataset; what names the chunk */
            return rst;
        }
        if (!fallback) {
            return SM_OK;
        }
    }
    sm_status st = SM_OK;
    pthread_mutex_lock(&h5_lock);
    const hid_t fspace = H5Dget_space(s->dset);
    const hid_t mspace = H5Screate_simple((int)s->ndim, count, NULL);
    if (fspace < 0 || mspace < 0) {
        st = SRC_FAIL(err, s->where, "H5Dget_space");
    } else if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0) {
        st = SRC_FAIL(err, s->where, "H5Sselect_hyperslab");
    } else if (H5Dread(s->dset, s->mtype, mspace, fspace, H5P_DEFAULT, out) < 0) {
        st = SRC_FAIL(err, s->where, "H5Dread");
    } else {
        *read += h5_fetched(s, off, shape);
    }
    if (mspace >= 0) {
        H5Sclose(mspace);
    }
    if (fspace >= 0) {
        H5Sclose(fspace);
    }
    pthread_mutex_unlock(&h5_lock);
    return st;
}

static void h5_close(struct sm_h5source *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&h5_lock);
    close_locked(s);
    pthread_mutex_unlock(&h5_lock);
    sm_free(s);
}
