/* OpenMP entry points, or single-thread stand-ins when built without OpenMP (SM_WITH_OPENMP=OFF),
 * so the drivers carry no #ifdefs in their logic. */
#ifndef SM_TILE_TILE_OMP_H
#define SM_TILE_TILE_OMP_H
#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_thread_num(void)
{
    return 0;
}
static inline int omp_get_max_threads(void)
{
    return 1;
}
#endif
#endif
