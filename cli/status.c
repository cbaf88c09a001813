/*
 * status.c — `percolator status`: what each of --endpoints says of itself
 * (GET /v1/health), one row a member, in the manner of `etcdctl endpoint
 * status -w table`: its member id, is it up, its role in its group,
 * whether it is a full member, its term, how far it has applied the log
 * and how far that is behind the leader's, its data dir's size on disk,
 * and the leader it follows. Every endpoint is asked, none skipped; the
 * rows are printed once all have answered, since a row's lag needs the
 * leader's answer.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COL_ENDPOINT, COL_ID, COL_STATUS, COL_ROLE, COL_MEMBERSHIP, COL_TERM, COL_APPLIED,
       COL_LAG, COL_SIZE, COL_LEADER, NCOLS };

static const char *const headers[NCOLS] = {"ENDPOINT", "ID", "STATUS", "ROLE", "MEMBERSHIP",
                                           "TERM", "APPLIED", "LAG", "STORE SIZE", "LEADER"};

typedef struct row {
    const char *endpoint;
    json_t *health;          /* the answer; NULL: unreachable (why says why) */
    char why[512];
    bool has_lag;
    json_int_t lag;
    const char *cell[NCOLS]; /* into health, endpoint or num */
    char num[NCOLS][32];     /* the cells made here (numbers, sizes) */
} row;

static const char *str_or(const json_t *j, const char *key, const char *none)
{
    const char *s = json_string_value(json_object_get(j, key));
    return s != NULL ? s : none;
}

/* A non-negative integer field, or -1 when absent (a single node, or a
 * public health answer without the token). */
static json_int_t int_or_none(const json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

/* Bytes as people read them, in powers of 1024: "512 B", "1.5 KiB", "12 MiB". */
static void human_bytes(json_int_t bytes, char *out, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%lld B", (long long)bytes);
    else
        snprintf(out, cap, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* Ask endpoint i; r->health is NULL when it did not answer as a
 * percolator program does. */
static void ask(size_t i, row *r)
{
    cli_reply rep;
    cli_request_one(i, "/v1/health", &rep);
    r->endpoint = cli_endpoint(i);
    if (rep.json != NULL && json_is_object(rep.json) && (rep.status == 200 || rep.status == 503)) {
        r->health = rep.json;
        rep.json = NULL; /* kept: cli_reply_free leaves it */
    } else {
        snprintf(r->why, sizeof r->why, "%s", rep.status == 0 ? rep.errmsg : "no health answer");
    }
    cli_reply_free(&rep);
}

/* The leader among the answers: the one that says it leads, in the
 * highest term (a leader cut off from the others may still say so, in an
 * older one), with its applied index. -1: none (no endpoint leads, or the
 * answers lack the term: a token is needed). */
static int leader_row(const row *rows, size_t n)
{
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *h = rows[i].health;
        if (h == NULL || strcmp(str_or(h, "role", ""), "leader") != 0 ||
            int_or_none(h, "applied_index") < 0 || int_or_none(h, "term") < 0)
            continue;
        if (best < 0 || int_or_none(h, "term") > int_or_none(rows[best].health, "term"))
            best = (int)i;
    }
    return best;
}

/* A row's lag: the leader's applied index less its own; 0 if ahead (the
 * answers are a few milliseconds apart: a member asked after the leader
 * may have applied more since). */
static void set_lag(row *r, const row *leader)
{
    json_int_t mine = int_or_none(r->health, "applied_index");
    if (leader == NULL || mine < 0)
        return;
    json_int_t theirs = int_or_none(leader->health, "applied_index");
    r->has_lag = true;
    r->lag = theirs > mine ? theirs - mine : 0;
}

static void int_cell(row *r, int col, json_int_t v)
{
    if (v < 0) {
        r->cell[col] = "-";
        return;
    }
    snprintf(r->num[col], sizeof r->num[col], "%lld", (long long)v);
    r->cell[col] = r->num[col];
}

static void fill_cells(row *r)
{
    const json_t *h = r->health;
    const json_t *leader = json_object_get(h, "leader");
    r->cell[COL_ENDPOINT] = r->endpoint;
    int_cell(r, COL_ID, int_or_none(h, "id"));
    r->cell[COL_STATUS] = str_or(h, "status", "?");
    r->cell[COL_ROLE] = str_or(h, "role", "single");
    r->cell[COL_MEMBERSHIP] = str_or(h, "membership", "-");
    int_cell(r, COL_TERM, int_or_none(h, "term"));
    int_cell(r, COL_APPLIED, int_or_none(h, "applied_index"));
    int_cell(r, COL_LAG, r->has_lag ? r->lag : -1);
    json_int_t size = int_or_none(h, "store_bytes");
    if (size >= 0) {
        human_bytes(size, r->num[COL_SIZE], sizeof r->num[COL_SIZE]);
        r->cell[COL_SIZE] = r->num[COL_SIZE];
    } else {
        r->cell[COL_SIZE] = "-";
    }
    r->cell[COL_LEADER] = json_is_object(leader) ? str_or(leader, "url", "?") : "-";
}

/* One row's cells, padded to the widths; the last column unpadded. */
static void print_cells(const char *const *cells, const int *width)
{
    for (int c = 0; c + 1 < NCOLS; c++)
        printf("%-*s  ", width[c], cells[c]);
    printf("%s\n", cells[NCOLS - 1]);
}

/* The table: each column as wide as its widest cell, two spaces apart. A
 * row that did not answer has its endpoint, "unreachable" and why. */
static void print_table(row *rows, size_t n)
{
    int width[NCOLS];
    for (int c = 0; c < NCOLS; c++)
        width[c] = (int)strlen(headers[c]);
    for (size_t i = 0; i < n; i++) {
        const char *down[NCOLS] = {[COL_ENDPOINT] = rows[i].endpoint, [COL_STATUS] = "unreachable"};
        for (int c = 0; c < NCOLS; c++) {
            const char *cell = rows[i].health != NULL ? rows[i].cell[c] : down[c];
            if (cell != NULL && (int)strlen(cell) > width[c])
                width[c] = (int)strlen(cell);
        }
    }
    print_cells(headers, width);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].health == NULL) {
            printf("%-*s  %-*s  %-*s  %s\n", width[COL_ENDPOINT], rows[i].endpoint,
                   width[COL_ID], "-", width[COL_STATUS], "unreachable", rows[i].why);
            continue;
        }
        print_cells(rows[i].cell, width);
    }
}

/* --json: the answers as they came, each with its endpoint and, when the
 * leader's answer was among them, its lag. */
static void print_json(const row *rows, size_t n)
{
    json_t *all = json_array();
    for (size_t i = 0; i < n && all != NULL; i++) {
        json_t *h = rows[i].health != NULL
                        ? json_deep_copy(rows[i].health)
                        : json_pack("{s:s,s:s}", "status", "unreachable", "error", rows[i].why);
        if (h == NULL)
            continue;
        json_object_set_new(h, "endpoint", json_string(rows[i].endpoint));
        if (rows[i].has_lag)
            json_object_set_new(h, "lag", json_integer(rows[i].lag));
        json_array_append_new(all, h);
    }
    json_dumpf(all, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(all);
}

int cli_status(const cli_opts *o)
{
    size_t n = cli_endpoint_count();
    row *rows = calloc(n ? n : 1, sizeof *rows);
    if (rows == NULL) {
        fprintf(stderr, "percolator: out of memory\n");
        return EXIT_SERVER;
    }
    int rc = EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        ask(i, &rows[i]);
        if (rows[i].health == NULL)
            rc = EXIT_UNAVAILABLE; /* down, or not a percolator program: said, and exit 4 */
    }
    int l = leader_row(rows, n);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].health == NULL)
            continue;
        set_lag(&rows[i], l >= 0 ? &rows[l] : NULL);
        fill_cells(&rows[i]);
    }
    if (o->json)
        print_json(rows, n);
    else
        print_table(rows, n);
    for (size_t i = 0; i < n; i++)
        json_decref(rows[i].health);
    free(rows);
    return rc;
}
