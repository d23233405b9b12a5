/* MPI implementation of par.h, built as the module libshardmill_mpi.so (linked to MPI) that par.c
 * loads on the first sm_par_init_comm that needs MPI: a plain run never maps libmpi. Every entry
 * point is static and reached through the table sm_par_mpi_module (par_int.h). MPI_Init is called
 * only when a launcher started the process (or a communicator was given) and MPI is not initialised
 * yet, so a plain run stays a single cheap process (SPEC §1) and a program that runs MPI itself
 * keeps it. Collectives run on a duplicate of the given communicator (MPI_COMM_WORLD by default);
 * MPI errors use the default handler (MPI_ERRORS_ARE_FATAL, inherited by the duplicate): a failed
 * collective aborts every rank. */
#include "shardmill/sm_config.h"

#include "par_int.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"

/* The current rank context: the duplicate communicator and this process's place in it. */
static bool mpi_on;
static bool owns_mpi; /* mpi_init_comm called MPI_Init_thread: sm_par_finalize finalises */
static bool stuck;
static int my_rank;
static int n_ranks = 1;
static MPI_Comm comm = MPI_COMM_NULL;

static const char *level_name(int level)
{
    return level == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
           : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
           : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
           : level == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                            : "an unknown level";
}

static sm_status mpi_fail(struct sm_err *err, const char *file, int line, const char *call, int rc)
{
    sm_err_set(err, SM_E_INTERNAL, file, line, "%s failed (code %d)", call, rc);
    sm_err_cause(err, "mpi", rc);
    return err->status;
}
/* An MPI call that returned rc != MPI_SUCCESS, at this file and line: the status now in err. */
#define PAR_MPI_ERR(err, call, rc) mpi_fail((err), __FILE__, __LINE__, (call), (rc))

static sm_status mpi_init_comm(const void *mpi_comm, int *argc, char ***argv, struct sm_err *err)
{
    if (mpi_on) {
        SM_FAIL(err, SM_E_USAGE, "ranks are already initialised (on a communicator of %d ranks)",
                n_ranks);
    }
    int inited = 0, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) {
        SM_FAIL(err, SM_E_USAGE, "MPI was finalised already; it cannot be initialised again");
    }
    MPI_Initialized(&inited);
    if (!inited && mpi_comm != NULL) {
        SM_FAIL(err, SM_E_USAGE, "an MPI communicator was given, but MPI is not initialised");
    }
    int provided = 0, rc;
    if (!inited) {
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) {
            return PAR_MPI_ERR(err, "MPI_Init_thread", rc);
        }
        owns_mpi = true;
    } else {
        MPI_Query_thread(&provided);
    }
    sm_status st = SM_OK;
    if (provided < MPI_THREAD_FUNNELED) {
        st = SM_ERR(err, SM_E_USAGE,
                    "MPI provides the thread level %s; shardmill needs at least "
                    "MPI_THREAD_FUNNELED (initialise MPI with MPI_Init_thread)",
                    level_name(provided));
    }
    const MPI_Comm base = mpi_comm != NULL ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    if (st == SM_OK && base == MPI_COMM_NULL) {
        st = SM_ERR(err, SM_E_USAGE,
                    "the MPI communicator given is MPI_COMM_NULL (this process is not in it)");
    }
    if (st == SM_OK && (rc = MPI_Comm_dup(base, &comm)) != MPI_SUCCESS) {
        st = PAR_MPI_ERR(err, "MPI_Comm_dup", rc);
    }
    if (st != SM_OK) {
        comm = MPI_COMM_NULL;
        if (owns_mpi) {
            MPI_Finalize();
            owns_mpi = false;
        }
        return st;
    }
    mpi_on = true;
    stuck = false;
    MPI_Comm_rank(comm, &my_rank);
    MPI_Comm_size(comm, &n_ranks);
    return SM_OK;
}

static void mpi_finalize(void)
{
    if (mpi_on) {
        if (!stuck) { /* a stuck collective would make the free wait for it */
            MPI_Comm_free(&comm);
        }
        comm = MPI_COMM_NULL;
        mpi_on = false;
        my_rank = 0;
        n_ranks = 1;
        if (owns_mpi) {
            MPI_Finalize();
            owns_mpi = false;
        }
    }
}

static const void *mpi_get_comm(void)
{
    return mpi_on ? &comm : NULL;
}

static bool mpi_owns_mpi(void)
{
    return owns_mpi;
}

static int mpi_rank(void)
{
    return my_rank;
}

static int mpi_size(void)
{
    return n_ranks;
}

static bool mpi_active(void)
{
    return mpi_on;
}

static void mpi_barrier(void)
{
    if (mpi_on) {
        MPI_Barrier(comm);
    }
}

/* MPI counts are int: collectives on large buffers go in pieces of at most 1 GiB. */
#define PIECE ((size_t)1 << 30)

static sm_status mpi_bcast(void *buf, size_t len, int root, struct sm_err *err)
{
    if (!mpi_on || n_ranks == 1) {
        return SM_OK;
    }
    if (root < 0 || root >= n_ranks) {
        SM_FAIL(err, SM_E_INTERNAL, "broadcast from rank %d of %d", root, n_ranks);
    }
    uint8_t *p = buf;
    for (size_t done = 0; done < len;) {
        const size_t n = len - done < PIECE ? len - done : PIECE;
        MPI_Bcast(p + done, (int)n, MPI_BYTE, root, comm);
        done += n;
    }
    return SM_OK;
}

static sm_status mpi_bcast_buf(struct sm_buf *b, int root, struct sm_err *err)
{
    if (!mpi_on || n_ranks == 1) {
        return SM_OK;
    }
    uint64_t len = my_rank == root ? (uint64_t)b->len : 0;
    SM_TRY(mpi_bcast(&len, sizeof(len), root, err));
    sm_status st = SM_OK;
    if (my_rank != root) {
        st = len > SIZE_MAX
                 ? SM_ERR(err, SM_E_NOMEM, "broadcast of %llu bytes", (unsigned long long)len)
                 : sm_buf_reserve(b, (size_t)len, err);
    }
    /* every rank must be able to receive before the bytes move */
    int ok = st == SM_OK, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    if (!all) {
        if (st == SM_OK) {
            SM_ERR(err, SM_E_NOMEM, "another rank cannot hold a broadcast of %llu bytes",
                   (unsigned long long)len);
        }
        return err->status;
    }
    SM_TRY(mpi_bcast(b->ptr, (size_t)len, root, err));
    b->len = (size_t)len;
    return SM_OK;
}

static sm_status mpi_gatherv_bytes(struct sm_bytes mine, struct sm_buf *all, int root,
                                   struct sm_err *err)
{
    if (!mpi_on || n_ranks == 1) {
        all->len = 0;
        SM_TRY(sm_buf_reserve(all, mine.len, err));
        if (mine.len > 0) {
            memcpy(all->ptr, mine.ptr, mine.len);
        }
        all->len = mine.len;
        return SM_OK;
    }
    uint64_t len = mine.len;
    uint64_t *lens = NULL;
    int *counts = NULL, *displs = NULL;
    sm_status st = SM_OK;
    if (my_rank == root) {
        lens = sm_calloc((size_t)n_ranks, sizeof(*lens));
        counts = sm_calloc((size_t)n_ranks, sizeof(*counts));
        displs = sm_calloc((size_t)n_ranks, sizeof(*displs));
        if (lens == NULL || counts == NULL || displs == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot gather from %d ranks", n_ranks);
        }
    }
    uint64_t scratch = 0;
    MPI_Gather(&len, 1, MPI_UINT64_T, lens != NULL ? (void *)lens : (void *)&scratch, 1,
               MPI_UINT64_T, root, comm);
    if (my_rank == root && st == SM_OK) {
        uint64_t total = 0;
        for (int r = 0; r < n_ranks; r++) {
            if (lens[r] > (uint64_t)INT_MAX || total > (uint64_t)INT_MAX - lens[r]) {
                st = SM_ERR(err, SM_E_NOMEM, "a gather of more than %d bytes", INT_MAX);
                break;
            }
            counts[r] = (int)lens[r];
            displs[r] = (int)total;
            total += lens[r];
        }
        all->len = 0;
        if (st == SM_OK) {
            st = sm_buf_reserve(all, total == 0 ? 1 : (size_t)total, err);
        }
        if (st == SM_OK) {
            all->len = (size_t)total;
        }
    }
    /* every rank must learn whether the root can receive before the bytes move */
    int ok = st == SM_OK, every = 0;
    MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_LAND, comm);
    if (every) {
        MPI_Gatherv(mine.ptr, (int)mine.len, MPI_BYTE, my_rank == root ? all->ptr : NULL, counts,
                    displs, MPI_BYTE, root, comm);
    } else if (st == SM_OK) {
        st = SM_ERR(err, SM_E_NOMEM, "rank %d cannot hold the gathered bytes", root);
    }
    sm_free(lens);
    sm_free(counts);
    sm_free(displs);
    return st;
}

static sm_status allreduce(void *v, size_t n, MPI_Datatype t, size_t elem, MPI_Op op)
{
    uint8_t *p = v;
    const size_t piece = PIECE / elem;
    for (size_t done = 0; done < n;) {
        const size_t k = n - done < piece ? n - done : piece;
        MPI_Allreduce(MPI_IN_PLACE, p + done * elem, (int)k, t, op, comm);
        done += k;
    }
    return SM_OK;
}

static sm_status mpi_sum_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    (void)err;
    if (!mpi_on || n_ranks == 1) {
        return SM_OK;
    }
    return allreduce(v, n, MPI_UINT64_T, sizeof(uint64_t), MPI_SUM); /* unsigned: wraps */
}

static sm_status mpi_max_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    (void)err;
    if (!mpi_on || n_ranks == 1) {
        return SM_OK;
    }
    return allreduce(v, n, MPI_UINT64_T, sizeof(uint64_t), MPI_MAX);
}

static sm_status mpi_sum_f64(double *v, size_t n, struct sm_err *err)
{
    (void)err;
    if (!mpi_on || n_ranks == 1) {
        return SM_OK;
    }
    return allreduce(v, n, MPI_DOUBLE, sizeof(double), MPI_SUM);
}

static sm_status mpi_max_f64(double *v, size_t n, struct sm_err *err)
{
    (void)err;
    if (!mpi_on || n_ranks == 1) {
        return SM_OK;
    }
    return allreduce(v, n, MPI_DOUBLE, sizeof(double), MPI_MAX);
}

/* The parts of struct sm_err that travel (pointers do not). */
struct wire_err {
    int32_t status, cause, line;
    char where[sizeof(((struct sm_err *)0)->where)];
    char what[sizeof(((struct sm_err *)0)->what)];
};

/* The second half of an agreement, once every rank contributed to the MIN reduction. */
static sm_status agree_finish(int lowest, struct sm_err *err);

static sm_status mpi_agree(sm_status local, struct sm_err *err)
{
    if (!mpi_on || n_ranks == 1) {
        return local;
    }
    int mine = local != SM_OK ? my_rank : n_ranks, lowest = n_ranks;
    MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm);
    return agree_finish(lowest, err);
}

static sm_status mpi_agree_within(sm_status local, uint64_t timeout_ms, struct sm_err *err)
{
    if (!mpi_on || n_ranks == 1) {
        return local;
    }
    int mine = local != SM_OK ? my_rank : n_ranks, lowest = n_ranks;
    MPI_Request req;
    MPI_Iallreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm, &req);
    const uint64_t deadline = sm_clock_ns() + timeout_ms * 1000000u;
    int done = 0;
    long nap = 1000; /* ns, doubling to 10 ms: quick when the others are close behind */
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done || sm_clock_ns() >= deadline) {
            break;
        }
        const struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        nap = nap < 10000000 ? nap * 2 : nap;
    }
    if (done) {
        return agree_finish(lowest, err);
    }
    /* A collective request cannot be cancelled: the ranks are out of step for good. */
    stuck = true;
    if (local == SM_OK) {
        SM_ERR(err, SM_E_INTERNAL, "another rank failed");
    }
    const size_t n = strlen(err->what);
    snprintf(err->what + n, sizeof(err->what) - n,
             "; ranks did not reach an agreement within %llu s (one is stuck in a collective call)",
             (unsigned long long)(timeout_ms / 1000));
    return err->status;
}

static bool mpi_stuck(void)
{
    return stuck;
}

static sm_status agree_finish(int lowest, struct sm_err *err)
{
    if (lowest == n_ranks) {
        return SM_OK;
    }
    struct wire_err w;
    memset(&w, 0, sizeof(w));
    if (my_rank == lowest) {
        w.status = (int32_t)err->status;
        w.cause = err->cause;
        w.line = err->line;
        memcpy(w.where, err->where, sizeof(w.where));
        memcpy(w.what, err->what, sizeof(w.what));
    }
    MPI_Bcast(&w, (int)sizeof(w), MPI_BYTE, lowest, comm);
    if (my_rank != lowest) {
        sm_err_clear(err);
        err->status = (sm_status)w.status;
        err->cause = w.cause;
        err->cause_lib = NULL;
        err->line = w.line;
        err->file = "(another rank)";
        memcpy(err->where, w.where, sizeof(err->where));
        memcpy(err->what, w.what, sizeof(err->what));
        err->where[sizeof(err->where) - 1] = '\0';
        err->what[sizeof(err->what) - 1] = '\0';
    }
    return err->status != SM_OK ? err->status : SM_E_INTERNAL;
}

static void mpi_abort(int code)
{
    if (mpi_on) {
        MPI_Abort(comm, code);
    }
}

/* Progress posts: tags outside any collective's (collectives use their own context). Each rank
 * has at most one send in flight, from a static buffer that lives until it is delivered. */
enum { TAG_PROGRESS = 7301, TAG_PROGRESS_LAST = 7302 };
static uint64_t post_buf[2];
static MPI_Request post_req = MPI_REQUEST_NULL;

static void mpi_progress_post(const uint64_t v[2], bool last)
{
    if (!mpi_on || my_rank == 0) {
        return;
    }
    int delivered = 1;
    if (post_req != MPI_REQUEST_NULL) {
        if (last) {
            MPI_Wait(&post_req, MPI_STATUS_IGNORE);
        } else {
            MPI_Test(&post_req, &delivered, MPI_STATUS_IGNORE);
        }
    }
    if (!delivered) {
        return; /* rank 0 is busy: this count is superseded by the next post */
    }
    post_buf[0] = v[0];
    post_buf[1] = v[1];
    if (last) {
        MPI_Send(post_buf, 2, MPI_UINT64_T, 0, TAG_PROGRESS_LAST, comm);
    } else {
        MPI_Isend(post_buf, 2, MPI_UINT64_T, 0, TAG_PROGRESS, comm, &post_req);
    }
}

static int mpi_progress_poll(uint64_t *all)
{
    if (!mpi_on || my_rank != 0 || n_ranks == 1) {
        return 0;
    }
    for (;;) {
        int flag = 0;
        MPI_Status stt;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &stt);
        if (!flag || (stt.MPI_TAG != TAG_PROGRESS && stt.MPI_TAG != TAG_PROGRESS_LAST)) {
            break;
        }
        uint64_t v[2];
        MPI_Recv(v, 2, MPI_UINT64_T, stt.MPI_SOURCE, stt.MPI_TAG, comm, MPI_STATUS_IGNORE);
        if (all != NULL) {
            uint64_t *dst = &all[3 * (size_t)stt.MPI_SOURCE];
            dst[0] = v[0] > dst[0] ? v[0] : dst[0];
            dst[1] = v[1] > dst[1] ? v[1] : dst[1];
            dst[2] |= stt.MPI_TAG == TAG_PROGRESS_LAST;
        }
    }
    int n = 0;
    for (int r = 1; all != NULL && r < n_ranks; r++) {
        n += all[3 * (size_t)r + 2] != 0;
    }
    return all != NULL ? n : n_ranks - 1;
}

/* The one symbol the module exports (its other symbols are hidden: C_VISIBILITY_PRESET). */
__attribute__((visibility("default"))) extern const struct sm_par_ops sm_par_mpi_module;
const struct sm_par_ops sm_par_mpi_module = {
    .head = {SM_MODULE_ABI, sizeof(struct sm_par_ops)},
    .init_comm = mpi_init_comm,
    .finalize = mpi_finalize,
    .comm = mpi_get_comm,
    .owns_mpi = mpi_owns_mpi,
    .rank = mpi_rank,
    .size = mpi_size,
    .active = mpi_active,
    .barrier = mpi_barrier,
    .bcast = mpi_bcast,
    .bcast_buf = mpi_bcast_buf,
    .gatherv_bytes = mpi_gatherv_bytes,
    .sum_u64 = mpi_sum_u64,
    .max_u64 = mpi_max_u64,
    .sum_f64 = mpi_sum_f64,
    .max_f64 = mpi_max_f64,
    .agree = mpi_agree,
    .agree_within = mpi_agree_within,
    .stuck = mpi_stuck,
    .progress_post = mpi_progress_post,
    .progress_poll = mpi_progress_poll,
    .abort = mpi_abort,
};
