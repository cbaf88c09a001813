/*
 * fuzz_flags.c — common/flags.c: the command line and the value parsers.
 *
 * Input: NUL-separated words. They become argv (after a program name) for
 * a table with a flag of every type, bounded and not. flags_parse answers
 * OK, HELP or ERROR; an error has a reason; on OK every bounded value is
 * in bounds, and parsing the same argv again gives the same values (the
 * defaults are reset). Each word also goes through flags_parse_uint64,
 * _int, _size and _bool, checked against strtoull/strtoll and a plain
 * reading of the size and bool rules.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "flags.h"
#include "fuzz.h"

#define MAX_ARGS 16

typedef struct {
    const char *str;
    int64_t i, ib;
    uint64_t u, ub, sz, szb;
    bool b;
    int e;
} values;

static const char *const colours[] = {"red", "green", "blue", NULL};

static int parse(values *v, int argc, char **argv, char *err, size_t errlen)
{
    const flag_def defs[] = {
        {"name", FLAG_STRING, &v->str, "x", "a string", NULL, 0, 0},
        {"int", FLAG_INT, &v->i, "-5", "any int", NULL, 0, 0},
        {"int-b", FLAG_INT, &v->ib, "3", "bounded int", NULL, -10, 10},
        {"n", FLAG_UINT64, &v->u, "0", "any count", NULL, 0, 0},
        {"n-b", FLAG_UINT64, &v->ub, "2", "bounded count", NULL, 1, 1000},
        {"size", FLAG_SIZE, &v->sz, "1MB", "any size", NULL, 0, 0},
        {"size-b", FLAG_SIZE, &v->szb, "4KB", "bounded size", NULL, 512, (int64_t)1 << 30},
        {"on", FLAG_BOOL, &v->b, "off", "a switch", NULL, 0, 0},
        {"colour", FLAG_ENUM, &v->e, "red", "a choice", colours, 0, 0},
    };
    return flags_parse(defs, sizeof defs / sizeof defs[0], argc, argv, err, errlen);
}

static bool all_digits(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

static void check_uint64(const char *w)
{
    uint64_t got = 0;
    int rc = flags_parse_uint64(w, &got);
    errno = 0;
    unsigned long long ref = all_digits(w) ? strtoull(w, NULL, 10) : 0;
    bool ok = all_digits(w) && errno == 0;
    FUZZ_CHECK((rc == 0) == ok);
    if (ok)
        FUZZ_CHECK(got == ref);
}

static void check_int(const char *w)
{
    int64_t got = 0;
    int rc = flags_parse_int(w, &got);
    const char *digits = w[0] == '-' ? w + 1 : w;
    errno = 0;
    long long ref = all_digits(digits) ? strtoll(w, NULL, 10) : 0;
    bool ok = all_digits(digits) && errno == 0;
    FUZZ_CHECK((rc == 0) == ok);
    if (ok)
        FUZZ_CHECK(got == ref);
}

/* digits, then nothing, b, or one of k m g t with nothing, b or ib after. */
static void check_size(const char *w)
{
    uint64_t got = 0;
    int rc = flags_parse_size(w, &got);
    size_t nd = strspn(w, "0123456789");
    const char *unit = w + nd;
    const char *units = "kmgt", *u = *unit ? strchr(units, tolower((unsigned char)*unit)) : NULL;
    unsigned shift = 0;
    bool unit_ok = *unit == '\0' || strcasecmp(unit, "b") == 0;
    if (!unit_ok && u != NULL) {
        const char *rest = unit + 1;
        unit_ok = *rest == '\0' || strcasecmp(rest, "b") == 0 || strcasecmp(rest, "ib") == 0;
        shift = 10 * (unsigned)(u - units + 1);
    }
    if (nd == 0 || nd >= 32 || !unit_ok) {
        FUZZ_CHECK(rc != 0);
        return;
    }
    char num[32];
    memcpy(num, w, nd);
    num[nd] = '\0';
    errno = 0;
    unsigned long long n = strtoull(num, NULL, 10);
    bool ok = errno == 0 && (shift == 0 || n <= (UINT64_MAX >> shift));
    FUZZ_CHECK((rc == 0) == ok);
    if (ok)
        FUZZ_CHECK(got == (uint64_t)n << shift);
}

static void check_bool(const char *w)
{
    static const char *const words[] = {"on", "true", "yes", "1", "off", "false", "no", "0"};
    bool got = false;
    int rc = flags_parse_bool(w, &got);
    int found = -1;
    for (int i = 0; i < 8; i++)
        if (strcasecmp(w, words[i]) == 0)
            found = i;
    FUZZ_CHECK((rc == 0) == (found >= 0));
    if (found >= 0)
        FUZZ_CHECK(got == (found < 4));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Own copy, NUL-terminated, split at NULs into words. */
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2] = {"fuzz"};
    int argc = 1;
    for (size_t i = 0; i <= size && argc <= MAX_ARGS; i += strlen(text + i) + 1)
        argv[argc++] = text + i;
    argv[argc] = NULL;

    for (int i = 1; i < argc; i++) {
        check_uint64(argv[i]);
        check_int(argv[i]);
        check_size(argv[i]);
        check_bool(argv[i]);
    }

    values v, again;
    char err[256] = "", err2[256] = "";
    int rc = parse(&v, argc, argv, err, sizeof err);
    FUZZ_CHECK(rc == FLAGS_OK || rc == FLAGS_HELP || rc == FLAGS_ERROR);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
    if (rc == FLAGS_ERROR)
        FUZZ_CHECK(err[0] != '\0');
    if (rc == FLAGS_OK) {
        FUZZ_CHECK(v.ib >= -10 && v.ib <= 10);
        FUZZ_CHECK(v.ub >= 1 && v.ub <= 1000);
        FUZZ_CHECK(v.szb >= 512 && v.szb <= (uint64_t)1 << 30);
        FUZZ_CHECK(v.e >= 0 && v.e < 3);
        FUZZ_CHECK(v.str != NULL);
        FUZZ_CHECK(parse(&again, argc, argv, err2, sizeof err2) == FLAGS_OK);
        FUZZ_CHECK(again.str == v.str && again.i == v.i && again.ib == v.ib && again.u == v.u &&
                   again.ub == v.ub && again.sz == v.sz && again.szb == v.szb &&
                   again.b == v.b && again.e == v.e);
    }
    free(text);
    return 0;
}
