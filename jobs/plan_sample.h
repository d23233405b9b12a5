/* plan's sample of the data (plan_sample.c): a few output chunks' worth of input read on the
 * ROI's diagonal, normalized and encoded as the write phase would, for the codec's ratio. */
#ifndef SM_JOBS_PLAN_SAMPLE_H
#define SM_JOBS_PLAN_SAMPLE_H

#include <shardmill/buf.h>

#include "plan_estimate.h"

/* The sample boxes and their input (sm_buf_free each of in[] after use). */
struct sm_plan_sample {
    unsigned n;
    uint64_t units_first; /* the read units of the first box (sample or not) */
    double in_ratio;
    uint64_t off[SM_PLAN_SAMPLES][SM_MAX_DIMS], shape[SM_PLAN_SAMPLES][SM_MAX_DIMS];
    struct sm_buf in[SM_PLAN_SAMPLES];
};

/* The product of v[0..n): a shape's elements. */
uint64_t sm_plan_prod(const uint64_t *v, unsigned n);

/* Input read units (chunks, inner chunks, a source's slabs) a box touches. */
uint64_t sm_plan_units_of(const struct sm_array_meta *m, const uint64_t *off,
                          const uint64_t *shape);

/* Up to SM_PLAN_SAMPLES output chunks of level s0 on the ROI's diagonal, each read whole from the
 * input (at most SM_PLAN_SAMPLE_UNITS read units in all); *units gets the read units touched. */
sm_status sm_plan_sample_read(const struct sm_plan_job *j, const struct sm_plan_input *in,
                              const struct sm_run_setup *su, const struct sm_output_spec *s0,
                              struct sm_plan_sample *sp, uint64_t *units, struct sm_err *err);

/* The sample normalized and encoded as level s0's chunks (and reduced into s1's, when given):
 * e->sample_raw / sample_encoded and level_sample_raw / level_sample_encoded. */
sm_status sm_plan_sample_encode(const struct sm_plan_job *j, const struct sm_run_setup *su,
                                enum sm_dtype dt, const struct sm_output_spec *s0,
                                const struct sm_output_spec *s1, const struct sm_plan_sample *sp,
                                struct sm_plan_estimate *e, struct sm_err *err);

#endif
