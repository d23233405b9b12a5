/* The export's write plan and names (export_int.h): which boxes a rank writes in which round, the
 * temporary file name, HDF5 path checks. No HDF5 here, so the plan is the same with or without
 * SM_WITH_HDF5 and is unit-tested alone.
 * Invariant: the boxes of a range are disjoint, in C order, made of whole units, and cover the
 * range exactly. */
#include "shardmill/sm_config.h"

#include "export_int.h"

#include <stdio.h>
#include <string.h>

sm_status sm_export_plan(unsigned ndim, const uint64_t *shape, const uint64_t *unit, uint64_t first,
                         uint64_t count, uint64_t max_units, struct sm_export_box *boxes,
                         size_t *nboxes, struct sm_err *err)
{
    *nboxes = 0;
    if (ndim == 0 || ndim > SM_MAX_DIMS || max_units == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "export plan of %u dimensions, %llu units per box", ndim,
                (unsigned long long)max_units);
    }
    uint64_t grid[SM_MAX_DIMS], stride[SM_MAX_DIMS];
    uint64_t total = 1;
    for (unsigned d = 0; d < ndim; d++) {
        if (unit[d] == 0) {
            SM_FAIL(err, SM_E_INTERNAL, "export unit of extent 0 on axis %u", d);
        }
        grid[d] = shape[d] / unit[d] + (shape[d] % unit[d] != 0);
        total *= grid[d];
    }
    for (unsigned d = ndim; d-- > 0;) {
        stride[d] = d + 1 < ndim ? stride[d + 1] * grid[d + 1] : 1;
    }
    if (first > total || count > total - first) {
        SM_FAIL(err, SM_E_INTERNAL, "export units [%llu, +%llu) past a grid of %llu",
                (unsigned long long)first, (unsigned long long)count, (unsigned long long)total);
    }
    size_t n = 0;
    for (uint64_t a = first, b = first + count; a < b;) {
        const uint64_t left = b - a;
        unsigned k = 0;
        while (k + 1 < ndim &&
               !(a % stride[k] == 0 && stride[k] <= left && stride[k] <= max_units)) {
            k++;
        }
        uint64_t run = left / stride[k];
        if (max_units / stride[k] < run) {
            run = max_units / stride[k];
        }
        if (k > 0) {
            const uint64_t to_parent = (stride[k - 1] - a % stride[k - 1]) / stride[k];
            run = run < to_parent ? run : to_parent;
        }
        if (boxes != NULL) {
            struct sm_export_box *bx = &boxes[n];
            for (unsigned d = 0; d < ndim; d++) {
                const uint64_t c = (a / stride[d]) % grid[d];
                const uint64_t len = d < k ? 1 : d == k ? run : grid[d];
                const uint64_t lo = d <= k ? c : 0;
                const uint64_t end = (lo + len) * unit[d];
                bx->off[d] = lo * unit[d];
                bx->shape[d] = (end < shape[d] ? end : shape[d]) - bx->off[d];
            }
        }
        n++;
        a += run * stride[k];
    }
    *nboxes = n;
    return SM_OK;
}

sm_status sm_export_dir_name(const char *path, char *buf, size_t cap, struct sm_err *err)
{
    const char *slash = strrchr(path, '/');
    int n;
    if (slash == NULL) {
        n = snprintf(buf, cap, ".");
    } else if (slash == path) {
        n = snprintf(buf, cap, "/");
    } else {
        n = snprintf(buf, cap, "%.*s", (int)(slash - path), path);
    }
    if (n < 0 || (size_t)n >= cap) {
        SM_FAIL_AT(err, SM_E_USAGE, path, "the export path is too long");
    }
    return SM_OK;
}

sm_status sm_export_check_h5path(const char *name, const char *key, struct sm_err *err)
{
    const char *why = NULL;
    if (name == NULL || name[0] != '/') {
        why = "must be an absolute HDF5 path such as /data";
    } else if (strlen(name) > 255) {
        why = "is longer than 255 bytes";
    } else if (name[1] == '\0') {
        why = "names the root group, not a dataset";
    } else {
        for (const char *c = name + 1; why == NULL;) {
            const char *e = strchr(c, '/');
            const size_t len = e != NULL ? (size_t)(e - c) : strlen(c);
            if (len == 0) {
                why = "has an empty component";
            } else if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) {
                why = "has a '.' or '..' component";
            }
            if (e == NULL) {
                break;
            }
            c = e + 1;
        }
    }
    if (why != NULL) {
        SM_FAIL_AT(err, SM_E_USAGE, key, "the dataset name %s (got '%.100s')", why,
                   name != NULL ? name : "");
    }
    return SM_OK;
}
