/* S3 settings and AWS credentials for an s3:// input (see job_s3.h). */
#include <shardmill/sm_config.h>

#include "job_s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

bool sm_job_aws_ini_get(const char *text, size_t n, const char *section, const char *key, char *out,
                        size_t cap, bool *have_section)
{
    bool in = false, found = false;
    *have_section = false;
    const size_t sl = strlen(section), kl = strlen(key);
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') {
            e++;
        }
        size_t a = i, b = e; /* the line [a, b), trimmed */
        i = e + 1;
        while (a < b && blank(text[a])) {
            a++;
        }
        while (b > a && blank(text[b - 1])) {
            b--;
        }
        if (a == b || text[a] == '#' || text[a] == ';') {
            continue;
        }
        if (text[a] == '[') {
            size_t s = a + 1, t = b;
            if (t > s && text[t - 1] == ']') {
                t--;
            }
            while (s < t && blank(text[s])) {
                s++;
            }
            while (t > s && blank(text[t - 1])) {
                t--;
            }
            in = t - s == sl && memcmp(text + s, section, sl) == 0;
            *have_section = *have_section || in;
            continue;
        }
        if (!in) {
            continue;
        }
        size_t eq = a;
        while (eq < b && text[eq] != '=') {
            eq++;
        }
        if (eq == b) {
            continue;
        }
        size_t ke = eq;
        while (ke > a && blank(text[ke - 1])) {
            ke--;
        }
        if (ke - a != kl || memcmp(text + a, key, kl) != 0) {
            continue;
        }
        size_t v = eq + 1;
        while (v < b && blank(text[v])) {
            v++;
        }
        if (b - v + 1 > cap || memchr(text + v, '\0', b - v) != NULL) {
            found = false; /* too long (never a truncated secret) or a NUL byte inside */
            continue;
        }
        memcpy(out, text + v, b - v);
        out[b - v] = '\0';
        found = true;
    }
    return found;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The file's text (at most 1 MiB), or NULL if it cannot be read. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    const size_t cap = (size_t)1 << 20;
    char *buf = sm_malloc(cap);
    size_t got = buf != NULL ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    *n = got;
    return buf;
}

static const char *keep(struct sm_job_s3 *s, const char *v, struct sm_err *err)
{
    if (v == NULL) {
        return NULL;
    }
    char *d = sm_strdup(v);
    if (d == NULL || s->nowned == sizeof(s->owned) / sizeof(s->owned[0])) {
        sm_free(d);
        SM_ERR(err, SM_E_NOMEM, "cannot hold the S3 settings");
        return NULL;
    }
    s->owned[s->nowned++] = d;
    return d;
}

/* One of the two AWS files: its path from `var`, else ~/.aws/<name>. */
static void aws_file(const char *var, const char *name, char *out, size_t cap)
{
    const char *p = env(var);
    const char *home = env("HOME");
    if (p != NULL) {
        snprintf(out, cap, "%s", p);
    } else if (home != NULL) {
        snprintf(out, cap, "%s/.aws/%s", home, name);
    } else {
        out[0] = '\0';
    }
}

sm_status sm_job_s3_resolve(const char *store, const char *endpoint, const char *region,
                            bool path_style, struct sm_job_s3 *out, struct sm_err *err)
{
    memset(out, 0, sizeof(*out));
    if (store == NULL || strncmp(store, "s3://", 5) != 0) {
        return SM_OK;
    }
    out->active = true;
    struct sm_s3_opts *o = &out->opts;
    o->path_style = path_style;
    const char *profile = env("AWS_PROFILE");
    const bool profile_named = profile != NULL;
    if (profile == NULL) {
        profile = "default";
    }
    char cred_path[1024], conf_path[1024], cfg_section[300];
    aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", cred_path, sizeof(cred_path));
    aws_file("AWS_CONFIG_FILE", "config", conf_path, sizeof(conf_path));
    if (strcmp(profile, "default") == 0) {
        snprintf(cfg_section, sizeof(cfg_section), "default");
    } else {
        snprintf(cfg_section, sizeof(cfg_section), "profile %s", profile);
    }
    size_t cred_n = 0, conf_n = 0;
    char *cred = cred_path[0] != '\0' ? slurp(cred_path, &cred_n) : NULL;
    char *conf = conf_path[0] != '\0' ? slurp(conf_path, &conf_n) : NULL;
    char val[4096];
    bool sec_cred = false, sec_conf = false;
    sm_status st = SM_OK;

    const char *ep =
        endpoint != NULL && endpoint[0] != '\0' ? endpoint : env("AWS_ENDPOINT_URL_S3");
    if (ep == NULL) {
        ep = env("AWS_ENDPOINT_URL");
    }
    o->endpoint = keep(out, ep, err);

    const char *rg = region != NULL && region[0] != '\0' ? region : env("AWS_REGION");
    if (rg == NULL) {
        rg = env("AWS_DEFAULT_REGION");
    }
    if (rg == NULL && conf != NULL &&
        sm_job_aws_ini_get(conf, conf_n, cfg_section, "region", val, sizeof(val), &sec_conf)) {
        rg = val;
    }
    o->region = keep(out, rg != NULL ? rg : "us-east-1", err);

    const char *id = env("AWS_ACCESS_KEY_ID");
    if (id != NULL) {
        const char *secret = env("AWS_SECRET_ACCESS_KEY");
        if (secret == NULL) {
            st = SM_ERR_AT(err, SM_E_USAGE, store,
                           "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
        } else {
            o->access_key_id = keep(out, id, err);
            o->secret_access_key = keep(out, secret, err);
            o->session_token = keep(out, env("AWS_SESSION_TOKEN"), err);
            o->credentials_from = "AWS_ACCESS_KEY_ID";
        }
    } else {
        /* the credentials file first, then the config file */
        char *texts[2] = {cred, conf};
        size_t lens[2] = {cred_n, conf_n};
        const char *sections[2] = {profile, cfg_section};
        const char *paths[2] = {cred_path, conf_path};
        for (int f = 0; f < 2 && o->access_key_id == NULL && st == SM_OK; f++) {
            bool have = false;
            const bool got = texts[f] != NULL &&
                             sm_job_aws_ini_get(texts[f], lens[f], sections[f], "aws_access_key_id",
                                                val, sizeof(val), &have);
            if (f == 0) {
                sec_cred = sec_cred || have;
            } else {
                sec_conf = sec_conf || have;
            }
            if (!got) {
                continue;
            }
            o->access_key_id = keep(out, val, err);
            if (!sm_job_aws_ini_get(texts[f], lens[f], sections[f], "aws_secret_access_key", val,
                                    sizeof(val), &have)) {
                st = SM_ERR_AT(err, SM_E_USAGE, paths[f],
                               "profile '%s' has aws_access_key_id but no aws_secret_access_key",
                               profile);
                break;
            }
            o->secret_access_key = keep(out, val, err);
            if (sm_job_aws_ini_get(texts[f], lens[f], sections[f], "aws_session_token", val,
                                   sizeof(val), &have)) {
                o->session_token = keep(out, val, err);
            }
            char from[1200];
            snprintf(from, sizeof(from), "profile '%s' in %s", profile, paths[f]);
            o->credentials_from = keep(out, from, err);
        }
        if (st == SM_OK && o->access_key_id == NULL && profile_named && !sec_cred && !sec_conf) {
            st = SM_ERR_AT(err, SM_E_USAGE, store,
                           "AWS_PROFILE names profile '%s', found in neither %s nor %s", profile,
                           cred_path, conf_path);
        }
    }
    if (cred != NULL) {
        memset(cred, 0, cred_n);
    }
    if (conf != NULL) {
        memset(conf, 0, conf_n);
    }
    sm_free(cred);
    sm_free(conf);
    memset(val, 0, sizeof(val));
    if (st == SM_OK && err->status != SM_OK) {
        st = err->status; /* an allocation in keep() */
    }
    return st;
}

void sm_job_s3_destroy(struct sm_job_s3 *s)
{
    for (size_t i = 0; i < s->nowned; i++) {
        memset(s->owned[i], 0, strlen(s->owned[i]));
        sm_free(s->owned[i]);
    }
    memset(s, 0, sizeof(*s));
}
