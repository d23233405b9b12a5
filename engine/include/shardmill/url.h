/* Credentials in URLs never leave the process (issue 19): every place that prints or stores a
 * URL -- provenance, reports, summaries, error lines, `plan`, `validate` -- passes it through
 * sm_url_redact first. */
#ifndef SM_CORE_URL_H
#define SM_CORE_URL_H

#include <stddef.h>

/* The text `s` with the secrets of every URL in it replaced by "<redacted>": the userinfo of an
 * authority ("http://alice:pw@host/" -> "http://<redacted>@host/") and the values of query
 * parameters that carry credentials (token, access_token, sig, signature, password, secret,
 * key, api_key, credential, authorization, X-Amz-*, X-Goog-*, case-insensitive). A URL starts at
 * "scheme://" and ends at white space, a quote or the end of `s`, so an error line holding a URL
 * is redacted as well as a bare URL. Returns `s` itself when nothing needs redacting (any
 * length), else `buf` holding the redacted text, truncated to cap - 1 bytes (truncation only cuts
 * redacted text, never exposes a secret). An authority cut short before its "@" ("http://u:pa...")
 * is redacted whole. cap must be at least 16. */
const char *sm_url_redact(const char *s, char *buf, size_t cap);

/* Buffer size that holds the redacted form of any URL the stores accept. */
#define SM_URL_REDACT_MAX 4200

#endif
