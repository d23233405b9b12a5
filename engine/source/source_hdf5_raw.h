/* Internal to the HDF5 reader module (source_hdf5.c, source_hdf5_raw.c): the raw-chunk path for
 * gzip datasets, whose inflate runs outside the reader's lock. */
#ifndef SM_SOURCE_SOURCE_HDF5_RAW_H
#define SM_SOURCE_SOURCE_HDF5_RAW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "shardmill/source.h"
#include "shardmill/status.h"

/* A dataset the raw path reads: chunked, filters [deflate] or [shuffle, deflate], stored in the
 * native type read (no conversion). */
struct sm_h5raw {
    bool on, shuffle;
    unsigned ndim;
    size_t elem, chunk_bytes;
    uint64_t chunk[SM_MAX_DIMS];
};

/* Whether dset (read as mtype) takes the raw path, and its plan. Call under the reader's lock. */
bool sm_h5raw_plan(hid_t dset, hid_t mtype, unsigned ndim, struct sm_h5raw *raw);
/* The box [off, off + shape) (no empty extent) into out, C order, taking `lock` only around each
 * chunk's fetch; *read += the stored bytes of every chunk fetched (also before a fallback).
 * *fallback true (SM_OK): a chunk the raw path does not decode; the caller reads the box with
 * H5Dread instead. SM_E_DATA naming the offset of a chunk stored with its filters whose bytes do
 * not inflate; SM_E_NOMEM. */
sm_status sm_h5raw_read_box(const struct sm_h5raw *raw, hid_t dset, pthread_mutex_t *lock,
                            const uint64_t *off, const uint64_t *shape, void *out, bool *fallback,
                            uint64_t *read, struct sm_err *err);

#endif
