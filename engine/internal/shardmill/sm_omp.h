/* OpenMP entry points, or single-thread stand-ins when built without OpenMP (SM_WITH_OPENMP=OFF),
 * so the drivers (tile/, write/, and array/'s parallel region reads: the only modules with
 * #pragma omp) carry no #ifdefs. Internal to the engine; not part of the umbrella header. */
#ifndef SM_CORE_SM_OMP_H
#define SM_CORE_SM_OMP_H
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
static inline int omp_get_level(void)
{
    return 0;
}
#endif
#endif
