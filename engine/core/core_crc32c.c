/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for the v3 crc32c codec and shard indexes.
 * Written by hand because Debian 12 ships no C library for it (zlib and libdeflate do CRC-32 only).
 * Uses the SSE4.2 crc32 instruction when the CPU has it (three streams at once on long inputs,
 * joined by shift tables, as in Mark Adler's crc32c.c), else slicing-by-8 tables. */
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

/* Shifting a CRC register over zero bytes is linear in GF(2): crc(A || B) = shift(crc(A), |B|) ^
 * crc(B) for raw registers. The operator for len zero bytes (len a power of two) as a 32x32 bit
 * matrix, by squaring the one-bit operator, then as four byte tables. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec != 0; vec >>= 1, mat++) {
        if (vec & 1u) {
            sum ^= *mat;
        }
    }
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++) {
        square[n] = gf2_times(mat, mat[n]);
    }
}

static void zeros_table(uint32_t zeros[4][256], size_t len)
{
    uint32_t op[32], sq[32];
    op[0] = 0x82F63B78u; /* one zero bit */
    for (int n = 1; n < 32; n++) {
        op[n] = 1u << (n - 1);
    }
    for (size_t bits = 1; bits < 8 * len; bits *= 2) { /* 2, 4, ... 8 * len zero bits */
        gf2_square(sq, op);
        memcpy(op, sq, sizeof(op));
    }
    for (uint32_t n = 0; n < 256; n++) {
        for (int b = 0; b < 4; b++) {
            zeros[b][n] = gf2_times(op, n << (8 * b));
        }
    }
}

static uint32_t shift_by(uint32_t zeros[4][256], uint32_t c)
{
    return zeros[0][c & 0xffu] ^ zeros[1][(c >> 8) & 0xffu] ^ zeros[2][(c >> 16) & 0xffu] ^
           zeros[3][c >> 24];
}

/* Three streams of STREAM bytes each interleaved: the crc32 instruction's latency is three times
 * its issue interval, so one stream leaves two thirds of it idle. */
#define STREAM 4096u
static uint32_t stream_zeros[4][256];
static pthread_once_t stream_once = PTHREAD_ONCE_INIT;

static void build_stream_zeros(void)
{
    zeros_table(stream_zeros, STREAM);
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    if (n >= 3 * STREAM) {
        pthread_once(&stream_once, build_stream_zeros);
    }
    while (n >= 3 * STREAM) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < STREAM; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + STREAM + i, 8);
            memcpy(&w2, p + 2 * STREAM + i, 8);
            c64 = _mm_crc32_u64(c64, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c64 = shift_by(stream_zeros, (uint32_t)c64) ^ (uint32_t)c1;
        c64 = shift_by(stream_zeros, (uint32_t)c64) ^ (uint32_t)c2;
        p += 3 * STREAM;
        n -= 3 * STREAM;
    }
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
