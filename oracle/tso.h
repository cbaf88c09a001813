/*
 * tso.h — the timestamp allocator (the oracle proper).
 *
 * Hands out strictly increasing timestamps in blocks [first, first+count).
 * Below the persisted high-water mark allocation is a lock-free atomic
 * compare-and-swap in memory; crossing it takes a mutex and persists a new
 * mark first (hwm.h), reserving a window that grows under load so the disk
 * is touched about once a second at most, whatever the rate.
 */
#ifndef PERCOLATOR_ORACLE_TSO_H
#define PERCOLATOR_ORACLE_TSO_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

#define TSO_MAX_TS ((UINT64_C(1) << 53) - 1) /* JSON-safe integers (DESIGN §2) */
#define TSO_MAX_COUNT 100000                  /* per request (the oracle's API) */

enum { TSO_OK = 0, TSO_ERR_IO = -1, TSO_ERR_EXHAUSTED = -2, TSO_ERR_ARG = -3 };

typedef struct tso tso;

/* Open the store in dir; allocation starts above the persisted mark.
 * metrics may be NULL. 0 or -1 with a reason in err. */
int tso_open(const char *dir, metrics_registry *metrics, tso **out, char *err, size_t errlen);

/* Allocate `count` (1..TSO_MAX_COUNT) consecutive timestamps; *first is the
 * first. TSO_OK, TSO_ERR_IO (cannot persist; err set), TSO_ERR_EXHAUSTED
 * (would pass 2^53), TSO_ERR_ARG. Thread-safe. */
int tso_next(tso *t, uint32_t count, uint64_t *first, char *err, size_t errlen);

/* --min-timestamp: make the persisted mark at least min before anything
 * is handed out (an oracle that lost its state, started again above what
 * the service's store holds). TSO_OK or an error with a reason. */
int tso_raise(tso *t, uint64_t min, char *err, size_t errlen);
uint64_t tso_persisted(const tso *t);   /* the mark on disk */
/* The highest timestamp handed out, or (before the first one of this run)
 * the persisted mark it starts above. */
uint64_t tso_last(const tso *t);

void tso_close(tso *t);

#endif
