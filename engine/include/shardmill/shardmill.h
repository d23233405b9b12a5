/* Umbrella header of the shardmill engine: every public header of engine/include/shardmill/, so a
 * program may include this one alone (tests/unit/core/test_umbrella.c compiles against it and
 * names something of each). A header added there is added here too. */
#ifndef SM_SHARDMILL_H
#define SM_SHARDMILL_H
#include "shardmill/sm_config.h"

#include "shardmill/alloc.h"
#include "shardmill/array.h"
#include "shardmill/box.h"
#include "shardmill/buf.h"
#include "shardmill/clock.h"
#include "shardmill/codec.h"
#include "shardmill/crc32c.h"
#include "shardmill/dtype.h"
#include "shardmill/export.h"
#include "shardmill/library.h"
#include "shardmill/meta.h"
#include "shardmill/par.h"
#include "shardmill/path.h"
#include "shardmill/pipeline.h"
#include "shardmill/progress.h"
#include "shardmill/source.h"
#include "shardmill/stats.h"
#include "shardmill/status.h"
#include "shardmill/store.h"
#include "shardmill/threads.h"
#include "shardmill/tile.h"
#include "shardmill/unit.h"
#include "shardmill/url.h"
#include "shardmill/write.h"
#endif
