/* par.h for the rest of the engine: one rank built in (no MPI), and the MPI implementation behind
 * a table of function pointers (par_int.h) filled from the module libshardmill_mpi.so, loaded
 * by the first sm_par_init_comm that needs MPI (a launcher started the process, as jobs/ decides,
 * or the program gave its communicator). A process that never initialises MPI ranks never maps
 * libmpi, Open MPI's runtime or hwloc (docs/BENCHMARKS.md "Start-up"). Once loaded, the module's
 * table answers every call (it is one rank again after sm_par_finalize). */
#include "shardmill/sm_config.h"

#include "shardmill/par.h"

#include <string.h>

#include "par_int.h"
#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/module.h"

/* One rank, no MPI: the table until the MPI module is loaded. */

static sm_status one_init_comm(const void *mpi_comm, int *argc, char ***argv, struct sm_err *err)
{
    (void)mpi_comm;
    (void)argc;
    (void)argv;
    SM_FAIL(err, SM_E_INTERNAL, "MPI ranks without the MPI module");
}

static void one_void(void)
{
}

static const void *one_comm(void)
{
    return NULL;
}

static bool one_false(void)
{
    return false;
}

static int one_rank(void)
{
    return 0;
}

static int one_size(void)
{
    return 1;
}

static sm_status one_bcast(void *buf, size_t len, int root, struct sm_err *err)
{
    (void)buf;
    (void)len;
    (void)root;
    (void)err;
    return SM_OK;
}

static sm_status one_bcast_buf(struct sm_buf *b, int root, struct sm_err *err)
{
    (void)b;
    (void)root;
    (void)err;
    return SM_OK;
}

static sm_status one_gatherv_bytes(struct sm_bytes mine, struct sm_buf *all, int root,
                                   struct sm_err *err)
{
    (void)root;
    all->len = 0;
    SM_TRY(sm_buf_reserve(all, mine.len, err));
    if (mine.len > 0) {
        memcpy(all->ptr, mine.ptr, mine.len);
    }
    all->len = mine.len;
    return SM_OK;
}

static sm_status one_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    (void)v;
    (void)n;
    (void)err;
    return SM_OK;
}

static sm_status one_f64(double *v, size_t n, struct sm_err *err)
{
    (void)v;
    (void)n;
    (void)err;
    return SM_OK;
}

static sm_status one_agree(sm_status local, struct sm_err *err)
{
    (void)err;
    return local;
}

static sm_status one_agree_within(sm_status local, uint64_t timeout_ms, struct sm_err *err)
{
    (void)timeout_ms;
    (void)err;
    return local;
}

static void one_progress_post(const uint64_t v[2], bool last)
{
    (void)v;
    (void)last;
}

static int one_progress_poll(uint64_t *all)
{
    (void)all;
    return 0;
}

static void one_abort(int code)
{
    (void)code;
}

static const struct sm_par_ops one_rank_ops = {
    .head = {SM_MODULE_ABI, sizeof(struct sm_par_ops)},
    .init_comm = one_init_comm,
    .finalize = one_void,
    .comm = one_comm,
    .owns_mpi = one_false,
    .rank = one_rank,
    .size = one_size,
    .active = one_false,
    .barrier = one_void,
    .bcast = one_bcast,
    .bcast_buf = one_bcast_buf,
    .gatherv_bytes = one_gatherv_bytes,
    .sum_u64 = one_u64,
    .max_u64 = one_u64,
    .sum_f64 = one_f64,
    .max_f64 = one_f64,
    .agree = one_agree,
    .agree_within = one_agree_within,
    .stuck = one_false,
    .progress_post = one_progress_post,
    .progress_poll = one_progress_poll,
    .abort = one_abort,
};

/* The table in use: set from the main thread by sm_par_init_comm, before any other thread. */
static const struct sm_par_ops *ops = &one_rank_ops;

#ifdef SM_PAR_WITH_MPI
/* What the MPI module calls in the engine, resolved when it is loaded (the program exports its
 * sm_* symbols: engine/par/sm_exports.list). Naming them here keeps them in a static link that
 * would otherwise drop the ones nothing else uses. Extern, so the compiler keeps the table. */
typedef void (*sm_par_fn)(void);
extern const sm_par_fn sm_par_mpi_imports[];
const sm_par_fn sm_par_mpi_imports[] = {
    (sm_par_fn)sm_buf_reserve, (sm_par_fn)sm_calloc,    (sm_par_fn)sm_free,
    (sm_par_fn)sm_clock_ns,    (sm_par_fn)sm_err_cause, (sm_par_fn)sm_err_clear,
    (sm_par_fn)sm_err_set,
};
#endif

sm_status sm_par_init(bool use_mpi, int *argc, char ***argv, struct sm_err *err)
{
    return sm_par_init_comm(use_mpi, NULL, argc, argv, err);
}

sm_status sm_par_init_comm(bool use_mpi, const void *mpi_comm, int *argc, char ***argv,
                           struct sm_err *err)
{
    if (!use_mpi && mpi_comm == NULL) {
        return SM_OK;
    }
#ifdef SM_PAR_WITH_MPI
    if (ops == &one_rank_ops) {
        const void *table = NULL;
        SM_TRY(sm_module_load(SM_PAR_MPI_MODULE, SM_PAR_MPI_SYMBOL, sizeof(struct sm_par_ops),
                              1 /* Open MPI's components resolve libmpi's symbols globally */,
                              &table, err));
        ops = table;
    }
    return ops->init_comm(mpi_comm, argc, argv, err);
#else
    (void)argc;
    (void)argv;
    if (mpi_comm != NULL) {
        SM_FAIL(err, SM_E_USAGE,
                "an MPI communicator was given, but this build has no MPI (SM_WITH_MPI=OFF)");
    }
    SM_FAIL(err, SM_E_USAGE, "launched under MPI, but this build has no MPI (SM_WITH_MPI=OFF)");
#endif
}

void sm_par_finalize(void)
{
    ops->finalize();
}

const void *sm_par_comm(void)
{
    return ops->comm();
}

bool sm_par_owns_mpi(void)
{
    return ops->owns_mpi();
}

int sm_par_rank(void)
{
    return ops->rank();
}

int sm_par_size(void)
{
    return ops->size();
}

bool sm_par_active(void)
{
    return ops->active();
}

void sm_par_barrier(void)
{
    ops->barrier();
}

sm_status sm_par_bcast(void *buf, size_t len, int root, struct sm_err *err)
{
    return ops->bcast(buf, len, root, err);
}

sm_status sm_par_bcast_buf(struct sm_buf *b, int root, struct sm_err *err)
{
    return ops->bcast_buf(b, root, err);
}

sm_status sm_par_gatherv_bytes(struct sm_bytes mine, struct sm_buf *all, int root,
                               struct sm_err *err)
{
    return ops->gatherv_bytes(mine, all, root, err);
}

sm_status sm_par_sum_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    return ops->sum_u64(v, n, err);
}

sm_status sm_par_max_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    return ops->max_u64(v, n, err);
}

sm_status sm_par_sum_f64(double *v, size_t n, struct sm_err *err)
{
    return ops->sum_f64(v, n, err);
}

sm_status sm_par_max_f64(double *v, size_t n, struct sm_err *err)
{
    return ops->max_f64(v, n, err);
}

sm_status sm_par_min_f64(double *v, size_t n, struct sm_err *err)
{
    /* min(x) = -max(-x), exact for every double (the sign bit flips), infinities included */
    for (size_t i = 0; i < n; i++) {
        v[i] = -v[i];
    }
    const sm_status st = ops->max_f64(v, n, err);
    for (size_t i = 0; i < n; i++) {
        v[i] = -v[i];
    }
    return st;
}

sm_status sm_par_agree(sm_status local, struct sm_err *err)
{
    return ops->agree(local, err);
}

sm_status sm_par_agree_within(sm_status local, uint64_t timeout_ms, struct sm_err *err)
{
    return ops->agree_within(local, timeout_ms, err);
}

bool sm_par_stuck(void)
{
    return ops->stuck();
}

void sm_par_progress_post(const uint64_t v[2], bool last)
{
    ops->progress_post(v, last);
}

int sm_par_progress_poll(uint64_t *all)
{
    return ops->progress_poll(all);
}

void sm_par_abort(int code)
{
    ops->abort(code);
}
