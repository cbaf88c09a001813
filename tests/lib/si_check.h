/*
 * si_check.h — a snapshot-isolation checker for histories recorded from
 * the API: transactions with their start_ts, the versions their reads
 * returned (value and commit_ts), their writes (each value written once in
 * the whole history, so a value names its writer) and their outcome as the
 * client saw it.
 *
 * What it checks (docs/DESIGN.md §1, the paper's snapshot isolation):
 *  1. a read returns a value some transaction wrote, never one whose
 *     commit was refused (aborted), at a commit_ts below the reader's
 *     start_ts, equal to its writer's commit_ts when that is known;
 *  2. a read returns exactly the newest committed version below start_ts
 *     (none if there is none): no committed write is skipped;
 *  3. two committed transactions that write one key do not overlap
 *     (start_ts..commit_ts): first committer wins, no lost update.
 * A transaction whose outcome the client could not learn (a transport
 * error, a 5xx, a kill during its commit) is "unknown": if a read returns
 * one of its values, it committed at the commit_ts that read shows, for
 * all its keys (every later reader must then see all of them: no
 * fractured commit); if no read does, it is left out.
 *
 * Recording is thread-safe; checking runs after the clients stopped.
 */
#ifndef PC_TL_SI_CHECK_H
#define PC_TL_SI_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef enum { SI_UNKNOWN = 0, SI_COMMITTED, SI_ABORTED } si_outcome;

typedef struct si_history si_history;

/* A history of at most max_txns transactions, each with at most 8 reads
 * and 8 writes; keys and values up to 63 bytes. */
si_history *si_new(size_t max_txns);
void si_free(si_history *h);

/* A transaction began at start_ts: its number, or -1 when full. */
long si_begin(si_history *h, uint64_t start_ts);
void si_read(si_history *h, long t, const char *key, bool found, const char *value,
             uint64_t commit_ts);
void si_write(si_history *h, long t, const char *key, const char *value);
void si_end(si_history *h, long t, si_outcome outcome, uint64_t commit_ts);

typedef struct {
    unsigned txns, committed, aborted, unknown, inferred; /* inferred: unknown, seen committed */
    unsigned reads;      /* reads checked */
    unsigned anomalies;  /* each printed, the first 20 */
} si_report;

si_report si_check(si_history *h);

/* ---- a workload that records into a history ---- */

/* How the workload reaches the service: like tl_try_call (status, 0 when
 * no answer; *out the JSON answer or NULL). */
typedef long (*si_call_fn)(void *ctx, const char *method, const char *path, const char *body,
                           json_t **out);

/* n transactions by client `client` (unique in the history: it names the
 * values written), each a session: begin, read 2 of
 * nkeys keys ("si0".."si<nkeys-1>"), write 1-2 of them with values unique
 * to (client, transaction, key), commit. Stops early at deadline_ms
 * (CLOCK_MONOTONIC, 0: none). Returns how many committed. */
unsigned si_run_client(si_history *h, si_call_fn call, void *ctx, unsigned client, unsigned n,
                       unsigned nkeys, unsigned seed, uint64_t deadline_ms);

#endif
