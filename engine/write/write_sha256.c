/* SHA-256 for provenance (SPEC §6): the hash of zarr.json in the completion marker and of the
 * effective configuration, through nettle (Debian nettle-dev; no global state, thread-safe).
 * Spec: https://csrc.nist.gov/pubs/fips/180-4/upd1/final (FIPS 180-4)
 * Invariant: lowercase hex of the 32-byte digest. */
#include "shardmill/write.h"

#include <nettle/sha2.h>

void sm_sha256(const void *data, size_t len, uint8_t out[32])
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, len, (const uint8_t *)data);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

void sm_sha256_hex(const void *data, size_t len, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t d[32];
    sm_sha256(data, len, d);
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}
