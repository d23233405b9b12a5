/* The pure pieces of the `s3` store (store_s3.c): AWS Signature Version 4 (canonical request,
 * string to sign, signing key, signature, Authorization header) and the parse of an S3 XML error
 * body. No libcurl, no I/O, no allocation: unit tests (tests/unit/store/test_store_s3_sign.c,
 * against AWS's published vectors) and the fuzz target (tests/fuzz/fuzz_s3_error.c) drive them.
 * Spec: https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html and
 * https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html */
#ifndef SM_STORE_STORE_S3_INT_H
#define SM_STORE_STORE_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/status.h"
#include "shardmill/store.h"

/* SHA-256 of the empty payload: the x-amz-content-sha256 of every GET and HEAD. */
#define SM_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* One header to sign: name in lowercase, value already trimmed (SigV4 "canonical" form). */
struct sm_s3_hdr {
    const char *name;
    const char *value;
};

/* The canonical request: method, URI (already URI-encoded, as sent), canonical query string
 * ("" for none), headers sorted by name, the signed-header list and the payload hash. False if it
 * does not fit in cap bytes (NUL included). */
bool sm_s3_canonical_request(char *out, size_t cap, const char *method, const char *uri,
                             const char *query, const struct sm_s3_hdr *hdrs, size_t n,
                             const char *payload_hash);

/* The string to sign for the canonical request at amz_date ("YYYYMMDDTHHMMSSZ"). */
bool sm_s3_string_to_sign(char *out, size_t cap, const char *amz_date, const char *region,
                          const char *service, const char *canonical_request);

/* The signature (lowercase hex) of string_to_sign with the key derived from secret, the date
 * (first 8 characters of amz_date), region and service. */
void sm_s3_signature(char out[65], const char *secret, const char *amz_date, const char *region,
                     const char *service, const char *string_to_sign);

/* Lowercase hex SHA-256 of n bytes. */
void sm_s3_sha256_hex(const void *data, size_t n, char out[65]);

/* The whole Authorization header value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=...") for a request with the given headers (sorted by name). */
bool sm_s3_authorization(char *out, size_t cap, const char *access_key, const char *secret,
                         const char *region, const char *service, const char *amz_date,
                         const char *method, const char *uri, const char *query,
                         const struct sm_s3_hdr *hdrs, size_t n, const char *payload_hash);

/* "YYYYMMDDTHHMMSSZ" of a UTC time in seconds since the epoch. */
void sm_s3_amz_date(int64_t t, char out[17]);

/* Where an s3:// URL's objects are (store_s3.c). */
struct sm_s3_url {
    char bucket[256];
    char region[128];
    char base[2048];    /* the HTTP URL of the prefix: <endpoint>/<bucket>/<prefix> (path-style) or
                           <scheme>://<bucket>.<host>/<prefix>, the prefix percent-encoded */
    char display[1200]; /* "s3://bucket/prefix" without trailing '/' (error locations) */
};

/* Maps s3://bucket/prefix with the endpoint, region and path_style of o (shardmill/store.h).
 * SM_E_USAGE naming the URL for a malformed one, "input.s3.endpoint" for a bad endpoint. */
sm_status sm_s3_map_url(const char *url, const struct sm_s3_opts *o, struct sm_s3_url *out,
                        struct sm_err *err);

/* The Code and Message of an S3 XML error body (<Error><Code>..</Code><Message>..</Message>),
 * each copied with the five predefined XML entities decoded, other bytes outside printable ASCII
 * replaced by '?', and truncated to fit (NUL-terminated). False (both "") when the body has no
 * Code element. The body is n bytes, not NUL-terminated. */
bool sm_s3_parse_error(const char *body, size_t n, char *code, size_t code_cap, char *msg,
                       size_t msg_cap);

#endif
