/* Status categories and the error context every fallible engine call fills (STYLE B5).
 * The lowest layer records *what* (with numbers); the layer that knows the object adds *where*.
 * Only jobs/ prints, once: "shardmill: error: <where>: <what>". The first error wins. */
#ifndef SM_CORE_STATUS_H
#define SM_CORE_STATUS_H

#include <stdarg.h>
#include <stdatomic.h>

typedef enum sm_status {
    SM_OK = 0,
    SM_E_USAGE,    /* CLI or config value          -> exit 2 */
    SM_E_DATA,     /* invalid/unsupported input    -> exit 3 */
    SM_E_IO,       /* disk, network                -> exit 4 */
    SM_E_LIMIT,    /* a configured resource limit  -> exit 5 */
    SM_E_NOMEM,    /* allocation failed            -> exit 1 */
    SM_E_INTERNAL, /* broken invariant, i.e. a bug -> exit 1 */
    SM_E_STOPPED,  /* a cooperative stop (SIGTERM/SIGINT) -> exit 128 + signal (cause) */
} sm_status;

struct sm_err {
    sm_status status;
    int cause;             /* errno, ZSTD_ErrorCode, libdeflate result, ... (0 if none) */
    const char *cause_lib; /* "errno", "zstd", "libdeflate", "blosc", or NULL */
    char where[256];       /* key, path, byte offset, YAML line:col */
    char what[256];
    const char *file; /* origin of the first failure */
    int line;
};

/* Resets an error context to SM_OK with empty strings. */
void sm_err_clear(struct sm_err *err);

/* Records a failure unless one is already recorded (the first error wins) and returns the status
 * that is now in err (so SM_FAIL can `return` it). `st` must not be SM_OK. */
sm_status sm_err_set(struct sm_err *err, sm_status st, const char *file, int line, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));
sm_status sm_err_vset(struct sm_err *err, sm_status st, const char *file, int line, const char *fmt,
                      va_list ap) __attribute__((format(printf, 5, 0)));

/* sm_err_set, then sm_err_where(err, "%s", where) unless where is NULL: a failure that names its
 * object (a configuration key, a path, a header field). Returns the status now in err. */
sm_status sm_err_set_at(struct sm_err *err, sm_status st, const char *where, const char *file,
                        int line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* A failed system call: records SM_E_IO with what = "<fmt ...>: <strerror(e)>" and the cause
 * ("errno", e), then `where` unless NULL. e is the caller's saved errno (later calls may change
 * errno). Returns the status now in err. */
sm_status sm_err_errno(struct sm_err *err, int e, const char *where, const char *file, int line,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Records the underlying library cause of the failure already in err (no-op if err is OK). */
void sm_err_cause(struct sm_err *err, const char *lib, int cause);

/* Fills `where` only if it is still empty: the innermost layer that knows the object names it. */
void sm_err_where(struct sm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Cooperative stops (SPEC §1): jobs/ owns the signal handlers (STYLE B10) and hands the drivers
 * a pointer to the flag its handler sets, an atomic int holding the signal number (0: go on; a
 * lock-free atomic, so a handler may store it and any thread may load it). A NULL flag never
 * stops. sm_stop_check records SM_E_STOPPED "stopped by signal N" with cause ("signal", N) in err
 * and returns it when the flag is set, else returns SM_OK and leaves err alone. Drivers call it
 * before each tile, shard or export round on every thread; jobs/ at each phase boundary. */
sm_status sm_stop_check(const atomic_int *stop, struct sm_err *err);

/* Short lowercase name of a status ("data", "io", ...). */
const char *sm_status_name(sm_status st);

/* Record a failure with what, this file and line, as an expression: the status now in err
 * (`st = SM_ERR(...)`, then clean up). SM_FAIL records it, then returns it from the calling
 * function. These macros (and SM_ERR_AT, SM_ERRNO) are the only places that write __FILE__ and
 * __LINE__: scripts/checksrc's rule err-at (ctest unit.arch.err_at) refuses them elsewhere. */
#define SM_ERR(err, st, ...) sm_err_set((err), (st), __FILE__, __LINE__, __VA_ARGS__)
#define SM_FAIL(err, st, ...) return SM_ERR((err), (st), __VA_ARGS__)

/* SM_FAIL naming the object, `where` (a key, a path, a field); SM_ERR_AT is the same as an
 * expression, the status now in err (`st = SM_ERR_AT(...)`, then clean up). */
#define SM_ERR_AT(err, st, where, ...)                                                             \
    sm_err_set_at((err), (st), (where), __FILE__, __LINE__, __VA_ARGS__)
#define SM_FAIL_AT(err, st, where, ...) return SM_ERR_AT((err), (st), (where), __VA_ARGS__)

/* sm_err_errno at this file and line, as an expression (the status now in err):
 * `return errno == ENOENT ? SM_OK : SM_ERRNO(err, errno, path, "cannot stat");` */
#define SM_ERRNO(err, e, where, ...)                                                               \
    sm_err_errno((err), (e), (where), __FILE__, __LINE__, __VA_ARGS__)

/* Forward a failure of a call that already filled err. */
#define SM_TRY(expr)                                                                               \
    do {                                                                                           \
        sm_status sm_try_st_ = (expr);                                                             \
        if (sm_try_st_ != SM_OK) {                                                                 \
            return sm_try_st_;                                                                     \
        }                                                                                          \
    } while (0)

/* Invariants (never input data): on in Debug builds, compiled out with NDEBUG. */
#ifndef NDEBUG
#include <assert.h>
#define SM_ASSERT(c) assert(c)
#else
#define SM_ASSERT(c) ((void)0)
#endif

#endif
