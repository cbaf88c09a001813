/*
 * hwm.h — the oracle's persisted high-water mark.
 *
 * The oracle may hand out a timestamp only once a mark at or above it is on
 * disk; after any crash it restarts above the mark, so no timestamp is ever
 * handed out twice (DESIGN §1.5, the paper's §2.3).
 *
 * On disk: <data-dir>/oracle.state, one line
 *     percolator-oracle-state v1 hwm=<decimal> crc32=<8 hex digits>\n
 * where the CRC-32 covers the text before " crc32=". The file is replaced
 * atomically (write oracle.state.tmp, fsync it, rename over, fsync the
 * directory), so a crash leaves either the old or the new mark, never a torn
 * one. A missing file means a fresh oracle (mark 0). Anything else that does
 * not parse exactly is corruption and refuses start-up: restarting from 1
 * would hand out old timestamps again.
 *
 * <data-dir>/LOCK is held with flock() while the store is open, so two
 * oracles can never share a data directory.
 */
#ifndef PERCOLATOR_ORACLE_HWM_H
#define PERCOLATOR_ORACLE_HWM_H

#include <stddef.h>
#include <stdint.h>

#define HWM_STATE_FILE "oracle.state"

typedef struct hwm_store hwm_store;

/* Create the directory if needed, lock it, read the mark (0 when there is
 * no state file yet). 0 or -1 with a one-line reason in err. */
int hwm_open(const char *dir, hwm_store **out, uint64_t *mark, char *err, size_t errlen);

/* Durably replace the mark. Counts the fsyncs it made in *fsyncs (may be
 * NULL). 0 or -1 with a reason in err; on failure the old mark stays valid. */
int hwm_persist(hwm_store *s, uint64_t mark, unsigned *fsyncs, char *err, size_t errlen);

/* Unlock and free. NULL is fine. */
void hwm_close(hwm_store *s);

/* The state file's text for a mark (for tests that craft state files).
 * Returns its length, or -1 if out is too small. */
int hwm_format(uint64_t mark, char *out, size_t outlen);

/* Parse a state file's text. 0 or -1. */
int hwm_parse(const char *text, size_t len, uint64_t *mark);

#endif
