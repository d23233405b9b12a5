/* Internals of export/: the plan that turns a rank's block of units into write boxes, and the
 * temporary name of the export file (pure logic, unit-tested: tests/unit/export); the table of
 * the HDF5 module. */
#ifndef SM_EXPORT_EXPORT_INT_H
#define SM_EXPORT_EXPORT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "shardmill/array.h"
#include "shardmill/export.h"
#include "shardmill/module.h"
#include "shardmill/status.h"

/* The HDF5 export is the module libshardmill_hdf5.so (export_hdf5.c, export_plan.c and
 * par/par_hdf5_*.c, linked to HDF5), loaded by export_load.c on the first sm_export_hdf5_check or
 * sm_export_hdf5_write: a run without an export never maps HDF5 (module.h). Its slots are the
 * functions of export.h of the same name (hidden in the module). */
#define SM_EXPORT_HDF5_MODULE "libshardmill_hdf5.so"
#define SM_EXPORT_HDF5_SYMBOL "sm_export_hdf5_module"
struct sm_export_hdf5_ops {
    struct sm_module_head head;
    sm_status (*check)(const char *path, const struct sm_export_opts *opts,
                       const struct sm_export_spec *spec, char **resolved, struct sm_err *err);
    sm_status (*write)(const char *path, const struct sm_export_opts *opts,
                       const struct sm_export_spec *spec, struct sm_array *src,
                       const struct sm_export_work *work, struct sm_scratch *scratch,
                       struct sm_export_result *res, struct sm_err *err);
};

/* A box of the array in elements: [off, off + shape), clipped to the array. */
struct sm_export_box {
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
};

/* Cuts units [first, first + count) of the C-order grid of `unit` boxes over `shape` into boxes
 * that are each a union of whole consecutive units forming a box (clipped to `shape`), of at most
 * max_units units each (>= 1), in C order of their first unit. Greedy from `first`: at each step
 * the outermost axis whose block of units starts here and fits, with as many consecutive blocks
 * along it as fit without leaving the parent block; so a contiguous range gives at most
 * 2 * ndim - 1 boxes plus one per max_units units. With boxes == NULL only *nboxes is computed
 * (call twice: count, then fill an array of that many). SM_E_INTERNAL for a zero unit, a range
 * past the grid or max_units 0. */
sm_status sm_export_plan(unsigned ndim, const uint64_t *shape, const uint64_t *unit, uint64_t first,
                         uint64_t count, uint64_t max_units, struct sm_export_box *boxes,
                         size_t *nboxes, struct sm_err *err);

/* The directory part of a path ("out/ct.h5" -> "out", "ct.h5" -> ".", "/ct.h5" -> "/").
 * SM_E_USAGE if it does not fit in cap bytes. */
sm_status sm_export_dir_name(const char *path, char *buf, size_t cap, struct sm_err *err);

/* Checks an HDF5 object path: absolute, components non-empty and neither "." nor "..", at most
 * 255 bytes. SM_E_USAGE naming `key`. */
sm_status sm_export_check_h5path(const char *name, const char *key, struct sm_err *err);

#endif
