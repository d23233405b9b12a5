/* S3 settings of an s3:// input (SPEC §3): input.s3.* from the config, then the standard AWS
 * environment variables and files. The engine never reads the environment: this fills the
 * struct sm_s3_opts it is given (shardmill/store.h). Credentials never come from the YAML file
 * and are never printed (only the access key id and where it came from appear in messages). */
#ifndef SM_JOBS_JOB_S3_H
#define SM_JOBS_JOB_S3_H

#include <stdbool.h>
#include <stddef.h>

#include <shardmill/status.h>
#include <shardmill/store.h>

struct sm_job_s3 {
    bool active; /* the store is an s3:// URL: opts is filled */
    struct sm_s3_opts opts;
    char *owned[8]; /* the strings opts points at */
    size_t nowned;
};

/* Resolves the settings for `store` (nothing unless it starts with "s3://"):
 *   endpoint: `endpoint` (input.s3.endpoint), else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL,
 *             else AWS (https://s3.<region>.amazonaws.com);
 *   region:   `region` (input.s3.region), else AWS_REGION, else AWS_DEFAULT_REGION, else the
 *             profile's `region` in the config file, else us-east-1;
 *   credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
 *             profile AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE
 *             (~/.aws/credentials), else of AWS_CONFIG_FILE (~/.aws/config, section
 *             "[profile NAME]"); none: requests go unsigned.
 * SM_E_USAGE (exit 2) for a key id without a secret, or an AWS_PROFILE named but found nowhere.
 * `where` names the configuration for messages. Call sm_job_s3_destroy even on failure. */
sm_status sm_job_s3_resolve(const char *store, const char *endpoint, const char *region,
                            bool path_style, struct sm_job_s3 *out, struct sm_err *err);
void sm_job_s3_destroy(struct sm_job_s3 *s);

/* The value of `key` in section `section` of an INI text of n bytes (AWS's credentials and config
 * files: "[section]" lines, "key = value" lines, '#' and ';' comments, surrounding blanks
 * trimmed; the last occurrence wins). Copied NUL-terminated into out; false if absent, longer
 * than cap - 1 or holding a NUL byte. *have_section says whether the section exists at all. */
bool sm_job_aws_ini_get(const char *text, size_t n, const char *section, const char *key, char *out,
                        size_t cap, bool *have_section);

#endif
