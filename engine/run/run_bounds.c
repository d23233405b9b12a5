/* Bounds a run checks before it commits to a grid (issue 19 item 11): a 4-line zarr.json or a
 * 6 KB HDF5 file can declare 2^60 voxels, and what the run would hold per shard must fit the
 * rank's budget: exit 5 naming limits.memory_bytes, before any output exists, rather than a
 * failed allocation (exit 1) or hours of work. */
#include "run_int.h"

#include <inttypes.h>

#include "shardmill/write.h"

sm_status sm_run_check_shards(uint64_t nshards, uint64_t memory_bytes, struct sm_err *err)
{
    const uint64_t need = sm_output_track_bytes(nshards);
    if (memory_bytes == 0 || need <= memory_bytes) {
        return SM_OK;
    }
    SM_FAIL_AT(err, SM_E_LIMIT, "output.shard",
               "%" PRIu64 " output shards take %" PRIu64 " bytes of records, more than "
               "limits.memory_bytes (%" PRIu64 "); set a larger output.shard or raise the limit",
               nshards, need, memory_bytes);
}
