/* Internals of par/: the table of the MPI implementation, exported by the module
 * libshardmill_mpi.so (par_mpi.c) and loaded by par.c on the first sm_par_init_comm that needs
 * MPI (module.h). Each slot has the signature of the par.h function of the same name, except
 * init_comm, which has no use_mpi (the module is loaded only to initialise MPI ranks). */
#ifndef SM_PAR_PAR_INT_H
#define SM_PAR_PAR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/module.h"
#include "shardmill/status.h"

#define SM_PAR_MPI_MODULE "libshardmill_mpi.so"
#define SM_PAR_MPI_SYMBOL "sm_par_mpi_module"

struct sm_par_ops {
    struct sm_module_head head;
    sm_status (*init_comm)(const void *mpi_comm, int *argc, char ***argv, struct sm_err *err);
    void (*finalize)(void);
    const void *(*comm)(void);
    bool (*owns_mpi)(void);
    int (*rank)(void);
    int (*size)(void);
    bool (*active)(void);
    void (*barrier)(void);
    sm_status (*bcast)(void *buf, size_t len, int root, struct sm_err *err);
    sm_status (*bcast_buf)(struct sm_buf *b, int root, struct sm_err *err);
    sm_status (*gatherv_bytes)(struct sm_bytes mine, struct sm_buf *all, int root,
                               struct sm_err *err);
    sm_status (*sum_u64)(uint64_t *v, size_t n, struct sm_err *err);
    sm_status (*max_u64)(uint64_t *v, size_t n, struct sm_err *err);
    sm_status (*sum_f64)(double *v, size_t n, struct sm_err *err);
    sm_status (*max_f64)(double *v, size_t n, struct sm_err *err);
    sm_status (*agree)(sm_status local, struct sm_err *err);
    sm_status (*agree_within)(sm_status local, uint64_t timeout_ms, struct sm_err *err);
    bool (*stuck)(void);
    void (*progress_post)(const uint64_t v[2], bool last);
    int (*progress_poll)(uint64_t *all);
    void (*abort)(int code);
};

#endif
