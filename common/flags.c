/*
 * flags.c — command-line flags with environment twins (see flags.h).
 *
 * Parsing is strict: numbers must be whole decimal numbers within range, no
 * trailing junk, no silent wrap-around. A value is validated the same way
 * whether it came from argv, the environment or the table's default, so a bad
 * default is caught by the first test that starts the program.
 */
#include "flags.h"
#include "version.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int flags_parse_uint64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1; /* overflow */
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int flags_parse_int(const char *s, int64_t *out)
{
    if (!s)
        return -1;
    bool neg = s[0] == '-';
    uint64_t u;
    if (flags_parse_uint64(neg ? s + 1 : s, &u) != 0)
        return -1;
    if (neg) {
        if (u > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)u;
    }
    return 0;
}

int flags_parse_bool(const char *s, bool *out)
{
    static const char *const on[] = {"on", "true", "yes", "1", NULL};
    static const char *const off[] = {"off", "false", "no", "0", NULL};
    if (!s)
        return -1;
    for (int i = 0; on[i]; i++)
        if (strcasecmp(s, on[i]) == 0) {
            *out = true;
            return 0;
        }
    for (int i = 0; off[i]; i++)
        if (strcasecmp(s, off[i]) == 0) {
            *out = false;
            return 0;
        }
    return -1;
}

/* Sizes are binary: K/KB/KiB = 1024 bytes, M = 1024^2, G, T, like
 * WiredTiger's cache_size. A bare number is bytes. */
int flags_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -1;
    size_t digits = strspn(s, "0123456789");
    char num[32];
    if (digits >= sizeof num)
        return -1;
    memcpy(num, s, digits);
    num[digits] = '\0';
    uint64_t v;
    if (flags_parse_uint64(num, &v) != 0)
        return -1;

    const char *unit = s + digits;
    unsigned shift;
    if (*unit == '\0' || strcasecmp(unit, "b") == 0)
        shift = 0;
    else {
        switch (toupper((unsigned char)unit[0])) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: return -1;
        }
        const char *rest = unit + 1;
        if (!(*rest == '\0' || strcasecmp(rest, "b") == 0 || strcasecmp(rest, "ib") == 0))
            return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

void flags_env_name(const char *name, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    int n = snprintf(out, outlen, "PERCOLATOR_");
    size_t i = n > 0 ? (size_t)n : 0;
    for (const char *p = name; *p && i + 1 < outlen; p++)
        out[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[i < outlen ? i : outlen - 1] = '\0';
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool out_of_bounds(const flag_def *d, int64_t v)
{
    return d->min < d->max && (v < d->min || v > d->max);
}

/* Store one value into a flag's destination. `origin` names where the value
 * came from for the error message ("--x", "PERCOLATOR_X", "default of --x"). */
static int set_value(const flag_def *d, const char *val, const char *origin,
                     char *err, size_t errlen)
{
    switch (d->type) {
    case FLAG_STRING:
        *(const char **)d->dest = val;
        return 0;
    case FLAG_INT: {
        int64_t v;
        if (flags_parse_int(val, &v) != 0) {
            set_err(err, errlen, "%s: '%s' is not an integer", origin, val);
            return -1;
        }
        if (out_of_bounds(d, v)) {
            set_err(err, errlen, "%s: %s is out of range %" PRId64 "..%" PRId64,
                    origin, val, d->min, d->max);
            return -1;
        }
        *(int64_t *)d->dest = v;
        return 0;
    }
    case FLAG_UINT64:
    case FLAG_SIZE: {
        uint64_t v;
        int rc = d->type == FLAG_SIZE ? flags_parse_size(val, &v)
                                      : flags_parse_uint64(val, &v);
        if (rc != 0) {
            set_err(err, errlen, d->type == FLAG_SIZE
                    ? "%s: '%s' is not a size (e.g. 512, 64KB, 512MB, 1GB)"
                    : "%s: '%s' is not a non-negative integer", origin, val);
            return -1;
        }
        if (d->min < d->max && (v < (uint64_t)d->min || v > (uint64_t)d->max)) {
            set_err(err, errlen, "%s: %s is out of range %" PRId64 "..%" PRId64,
                    origin, val, d->min, d->max);
            return -1;
        }
        *(uint64_t *)d->dest = v;
        return 0;
    }
    case FLAG_BOOL: {
        bool v;
        if (flags_parse_bool(val, &v) != 0) {
            set_err(err, errlen, "%s: '%s' is not on/off", origin, val);
            return -1;
        }
        *(bool *)d->dest = v;
        return 0;
    }
    case FLAG_ENUM:
        for (int i = 0; d->choices && d->choices[i]; i++) {
            if (strcmp(val, d->choices[i]) == 0) {
                *(int *)d->dest = i;
                return 0;
            }
        }
        {
            char list[256] = "";
            size_t used = 0;
            for (int i = 0; d->choices && d->choices[i]; i++) {
                int k = snprintf(list + used, sizeof list - used, "%s%s",
                                 i ? "|" : "", d->choices[i]);
                if (k < 0 || (size_t)k >= sizeof list - used)
                    break;
                used += (size_t)k;
            }
            set_err(err, errlen, "%s: '%s' is not one of %s", origin, val, list);
        }
        return -1;
    }
    set_err(err, errlen, "%s: unknown flag type", origin);
    return -1;
}

static const flag_def *find_flag(const flag_def *defs, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0)
            return &defs[i];
    return NULL;
}

int flags_parse(const flag_def *defs, size_t n, int argc, char **argv,
                char *err, size_t errlen)
{
    char origin[160];

    /* 1. Defaults: reset every destination so parsing twice is repeatable. */
    for (size_t i = 0; i < n; i++) {
        const flag_def *d = &defs[i];
        switch (d->type) {
        case FLAG_STRING: *(const char **)d->dest = NULL; break;
        case FLAG_INT: *(int64_t *)d->dest = 0; break;
        case FLAG_UINT64:
        case FLAG_SIZE: *(uint64_t *)d->dest = 0; break;
        case FLAG_BOOL: *(bool *)d->dest = false; break;
        case FLAG_ENUM: *(int *)d->dest = 0; break;
        }
        if (d->def) {
            snprintf(origin, sizeof origin, "default of --%s", d->name);
            if (set_value(d, d->def, origin, err, errlen) != 0)
                return FLAGS_ERROR;
        }
    }

    /* 2. Environment twins. An empty variable counts as unset. */
    for (size_t i = 0; i < n; i++) {
        char env[128];
        flags_env_name(defs[i].name, env, sizeof env);
        const char *v = getenv(env);
        if (v && *v && set_value(&defs[i], v, env, err, errlen) != 0)
            return FLAGS_ERROR;
    }

    /* 3. Command line. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return FLAGS_HELP;
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            set_err(err, errlen, "unexpected argument '%s' (see --help)", a);
            return FLAGS_ERROR;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const flag_def *d = find_flag(defs, n, name, nlen);
        if (!d) {
            set_err(err, errlen, "unknown flag '--%.*s' (see --help)", (int)(nlen > 64 ? 64 : nlen), name);
            return FLAGS_ERROR;
        }
        snprintf(origin, sizeof origin, "--%s", d->name);
        const char *val;
        if (eq) {
            val = eq + 1;
        } else if (d->type == FLAG_BOOL) {
            /* "--one-pc" alone means on; "--one-pc off" takes the word. */
            bool tmp;
            if (i + 1 < argc && flags_parse_bool(argv[i + 1], &tmp) == 0)
                val = argv[++i];
            else
                val = "on";
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            set_err(err, errlen, "--%s needs a value", d->name);
            return FLAGS_ERROR;
        }
        if (set_value(d, val, origin, err, errlen) != 0)
            return FLAGS_ERROR;
    }
    return FLAGS_OK;
}

static const char *type_metavar(const flag_def *d)
{
    switch (d->type) {
    case FLAG_STRING: return "STR";
    case FLAG_INT: return "INT";
    case FLAG_UINT64: return "N";
    case FLAG_BOOL: return "on|off";
    case FLAG_SIZE: return "SIZE";
    case FLAG_ENUM: return "CHOICE";
    }
    return "VALUE";
}

void flags_print_help(FILE *out, const char *prog, const char *summary,
                      const flag_def *defs, size_t n)
{
    fprintf(out, "Usage: %s [flags]\n", prog);
    if (summary)
        fprintf(out, "%s\n", summary);
    fprintf(out, "\nEvery flag has an environment twin; flags win over the environment.\n\n");
    for (size_t i = 0; i < n; i++) {
        const flag_def *d = &defs[i];
        char env[128];
        flags_env_name(d->name, env, sizeof env);
        fprintf(out, "  --%s %s\n      %s\n      env %s; default %s", d->name,
                type_metavar(d), d->help ? d->help : "", env, d->def ? d->def : "(none)");
        if (d->type == FLAG_ENUM && d->choices) {
            fprintf(out, "; one of ");
            for (int k = 0; d->choices[k]; k++)
                fprintf(out, "%s%s", k ? "|" : "", d->choices[k]);
        }
        if (d->min < d->max && d->type != FLAG_ENUM && d->type != FLAG_BOOL &&
            d->type != FLAG_STRING)
            fprintf(out, "; range %" PRId64 "..%" PRId64, d->min, d->max);
        fprintf(out, "\n");
    }
    fprintf(out, "  --help\n      print this help and exit\n");
    fprintf(out, "  --version\n      print the version and exit\n");
}

void flags_parse_or_exit(const char *prog, const char *summary,
                         const flag_def *defs, size_t n, int argc, char **argv)
{
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s %s\n", prog, PERCOLATOR_VERSION);
            fflush(stdout);
            exit(0);
        }
    }
    int rc = flags_parse(defs, n, argc, argv, err, sizeof err);
    if (rc == FLAGS_HELP) {
        flags_print_help(stdout, prog, summary, defs, n);
        fflush(stdout);
        exit(0);
    }
    if (rc == FLAGS_ERROR) {
        fprintf(stderr, "%s: %s\n", prog, err);
        exit(2);
    }
}
