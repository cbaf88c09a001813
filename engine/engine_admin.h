/*
 * engine_admin.h — the engine for operators: online backups and restores
 * of the store (docs/DESIGN.md §4.9) and row counts. The protocol's API is
 * engine.h.
 */
#ifndef PC_ENGINE_ADMIN_H
#define PC_ENGINE_ADMIN_H

#include "engine.h"

/* ---- backup and restore (backup.c, docs/DESIGN.md §4.9) ---- */

typedef struct {
    uint64_t files, bytes;    /* copied */
} pc_backup_stats;

/* Called once during a backup, after its first file is copied (a backup
 * in progress, partly on disk): tests hold or fail a backup there (the
 * service's failpoint). Non-zero fails the backup. */
typedef int (*pc_backup_hook)(void *arg);

/* A consistent copy of the store, taken while it serves, into dest (made
 * here; it must not exist: PC_INVALID). It holds every commit that was
 * durable when the call began, and the store once: a checkpoint first, so
 * that it copies the log from there only. PC_LOCKED: another backup is
 * running (dest is not made). On any failure dest is removed again.
 * hook may be NULL. */
pc_rc pc_backup(pc_engine *e, const char *dest, pc_backup_hook hook, void *arg,
                pc_backup_stats *st);

/* Remove a backup pc_backup made (its files, then its directory): the
 * service's retention. PC_OK, or PC_ERROR (the reason logged; the store is
 * not affected). */
pc_rc pc_backup_remove(pc_engine *e, const char *backup);

/* Make the data directory cfg->dir (it must not exist) from a backup:
 * open it with pc_engine_open(cfg) afterwards; messages go to cfg->log.
 * PC_INVALID when backup is not one. */
pc_rc pc_restore(const char *backup, const pc_engine_config *cfg);

typedef struct {
    uint64_t data, lock, write, notify;
} pc_table_counts;

/* Rows in each table (a full scan: for tests and operators). */
pc_rc pc_count_rows(pc_session *s, pc_table_counts *c);

/* ---- the size of a key range (range_size.c, docs/DESIGN.md §6.2) ---- */

typedef struct {
    uint64_t bytes;  /* keys and values of the data and write rows of the range */
    uint64_t keys;   /* user keys with a version in it */
    pc_buf middle;   /* where a split would cut it in two of about half the bytes:
                      * the user key whose rows take the count past half (the
                      * second key when that is the first); empty when it holds
                      * fewer than two keys. The caller frees it. */
} pc_range_stats;

/* The range [start, end) of user keys (end.data NULL: to the end) as it
 * is in one snapshot: a full walk of it (for a region's split check, not
 * for requests). Not in propose mode (PC_INVALID). */
pc_rc pc_range_size(pc_session *s, pc_slice start, pc_slice end, pc_range_stats *st);

#endif
