/* Umbrella header of the shardmill engine. */
#ifndef SM_SHARDMILL_H
#define SM_SHARDMILL_H
#include "shardmill/alloc.h"
#include "shardmill/array.h"
#include "shardmill/box.h"
#include "shardmill/buf.h"
#include "shardmill/clock.h"
#include "shardmill/codec.h"
#include "shardmill/crc32c.h"
#include "shardmill/dtype.h"
#include "shardmill/meta.h"
#include "shardmill/par.h"
#include "shardmill/pipeline.h"
#include "shardmill/stats.h"
#include "shardmill/status.h"
#include "shardmill/store.h"
#include "shardmill/threads.h"
#include "shardmill/tile.h"
#endif
