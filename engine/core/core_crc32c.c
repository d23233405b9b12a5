/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for the v3 crc32c codec and shard indexes.
 * Written by hand because Debian 12 ships no C library for it (zlib and libdeflate do CRC-32 only).
 * Uses the SSE4.2 crc32 instruction when the CPU has it, else slicing-by-8 tables. */
#include "shardmill/sm_config.h"

#include "shardmill/crc32c.h"

#include <pthread.h>

#include <stdbool.h>
#include <string.h>

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xffu];
        }
    }
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c; /* little-endian hosts only (checked in CMake via the x86_64/aarch64 targets) */
        c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
            table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n-- != 0) {
        c = table[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
    }
    return c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n-- != 0) {
        c = _mm_crc32_u8(c, *p++);
    }
    return c;
}

static bool have_hw(void)
{
    return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    return crc_soft(c, p, n);
}

static bool have_hw(void)
{
    return false;
}
#endif

uint32_t sm_crc32c(uint32_t crc, const void *data, size_t n)
{
    uint32_t c = ~crc;
    if (have_hw()) {
        c = crc_hw(c, data, n);
    } else {
        pthread_once(&table_once, build_table);
        c = crc_soft(c, data, n);
    }
    return ~c;
}
