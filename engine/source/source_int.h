/* Internal to source/: the source object behind the vtable. */
#ifndef SM_SOURCE_SOURCE_INT_H
#define SM_SOURCE_SOURCE_INT_H

#include <stdatomic.h>

#include "shardmill/source.h"

struct sm_source {
    const struct sm_source_ops *ops;
    void *user;
    struct sm_source_info info;
    atomic_uint_least64_t bytes_read;
};

#endif
