/*
 * store_size.h — how many bytes a program's data dir takes on disk (its
 * WiredTiger files or high-water mark, and its Raft log), for the
 * `store_bytes` of /v1/health and `percolator status`.
 *
 * Health is public and answered on an event thread, so a request must not
 * touch the file system: a thread of its own walks the dir every
 * interval and a request reads the last figure. The walk is bounded (at
 * most STORE_SIZE_MAX_FILES entries, STORE_SIZE_MAX_DEPTH levels, links
 * not followed): a dir holds a few dozen files, and a mistaken --data-dir
 * (a home directory) costs one bounded walk a second, never more.
 */
#ifndef PERCOLATOR_STORE_SIZE_H
#define PERCOLATOR_STORE_SIZE_H

#include <stdint.h>

#define STORE_SIZE_MAX_FILES 100000
#define STORE_SIZE_MAX_DEPTH 4

typedef struct store_size store_size;

/* Walk dir once now (so the first answer is a real figure), then every
 * interval_ms on a thread of its own. NULL when out of memory or no
 * thread could be made. */
store_size *store_size_start(const char *dir, unsigned interval_ms);
/* The bytes found by the last walk. */
uint64_t store_size_bytes(const store_size *s);
/* Stop the thread and free (NULL: nothing). */
void store_size_stop(store_size *s);

/* One walk: the blocks allocated to the regular files under dir (st_blocks
 * * 512, as `du` counts), within the bounds above; a file that vanishes
 * meanwhile counts 0, an unreadable dir adds nothing. */
uint64_t store_size_walk(const char *dir);

#endif
