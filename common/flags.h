/*
 * flags.h — table-driven command-line flags with environment twins.
 *
 * A program describes its settings in one table of flag_def. Every flag
 * "--data-dir" has the twin variable PERCOLATOR_DATA_DIR; precedence is
 * flag > environment > default. "--help" prints every flag with its twin and
 * default. A bad flag or value is one line on stderr and exit status 2
 * (flags_parse_or_exit), as the README's Configuration section says.
 *
 * Accepted forms: "--name value" and "--name=value". A bool flag given with
 * no value ("--one-pc" followed by another flag or nothing) means on.
 * Values point into argv/environ/the table, so nothing needs freeing.
 */
#ifndef PERCOLATOR_FLAGS_H
#define PERCOLATOR_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum flag_type {
    FLAG_STRING, /* dest: const char **                                      */
    FLAG_INT,    /* dest: int64_t *   decimal, optional '-'                  */
    FLAG_UINT64, /* dest: uint64_t *  decimal                                */
    FLAG_BOOL,   /* dest: bool *      on/off, true/false, yes/no, 1/0        */
    FLAG_SIZE,   /* dest: uint64_t *  bytes: 512, 64KB, 512MB, 1GiB, 2T...   */
    FLAG_ENUM    /* dest: int *       index into choices                     */
} flag_type;

typedef struct flag_def {
    const char *name;            /* without the dashes: "data-dir" */
    flag_type type;
    void *dest;                  /* see flag_type */
    const char *def;             /* default as typed on the command line; NULL: none */
    const char *help;            /* one line */
    const char *const *choices;  /* FLAG_ENUM: NULL-terminated names */
    int64_t min, max;            /* numeric bounds, checked when min < max */
} flag_def;

enum { FLAGS_OK = 0, FLAGS_HELP = 1, FLAGS_ERROR = -1 };

/* Apply defaults, then environment twins, then argv (argv[0] is skipped).
 * Returns FLAGS_OK, FLAGS_HELP (--help/-h seen; nothing printed) or
 * FLAGS_ERROR with a one-line reason in err. */
int flags_parse(const flag_def *defs, size_t n, int argc, char **argv,
                char *err, size_t errlen);

/* The usual front door: on --help print help to stdout and exit 0; on error
 * print "prog: reason" to stderr and exit 2. */
void flags_parse_or_exit(const char *prog, const char *summary,
                         const flag_def *defs, size_t n, int argc, char **argv);

void flags_print_help(FILE *out, const char *prog, const char *summary,
                      const flag_def *defs, size_t n);

/* "data-dir" -> "PERCOLATOR_DATA_DIR". Truncates to outlen. */
void flags_env_name(const char *name, char *out, size_t outlen);

/* Parsers shared with anything else that reads such values. 0 or -1. */
int flags_parse_size(const char *s, uint64_t *out);
int flags_parse_bool(const char *s, bool *out);
int flags_parse_int(const char *s, int64_t *out);
int flags_parse_uint64(const char *s, uint64_t *out);

#endif
