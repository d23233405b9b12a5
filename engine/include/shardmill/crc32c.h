/* CRC-32C (Castagnoli), as used by the Zarr v3 crc32c codec and shard indexes. */
#ifndef SM_CORE_CRC32C_H
#define SM_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends `crc` (0 to start) over n bytes; crc32c("123456789") == 0xE3069283. Thread-safe. */
uint32_t sm_crc32c(uint32_t crc, const void *data, size_t n);

#endif
