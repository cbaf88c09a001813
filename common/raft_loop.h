/*
 * raft_loop.h — a libuv loop on a thread of its own that Raft groups share
 * (docs/DESIGN.md §6.5, step 1): one thread, one timer that ticks every
 * group on it at once, and a queue through which other threads hand it
 * work. A member of a group (raft_host.h) is set up and closed on the
 * loop's thread, because libuv's handles may only be made and closed
 * there; a process with one group gives it a loop of its own, a process
 * with many puts them on a few loops (one a core).
 *
 * libraft keeps no state between its instances (but rand(), which glibc
 * locks), so many `struct raft` may run on one loop. What a group costs
 * the others on its loop: libraft 0.15 writes its log's appends on libuv's
 * thread pool, but on the loop thread it loads the log at start, writes a
 * bootstrap, and syncs its metadata file (fdatasync) for every new term
 * and vote: one group's election holds its loop's other groups for a disk
 * sync (DESIGN §6.5; a shared per-node log, step 4, takes it off the loop).
 */
#ifndef PC_RAFT_LOOP_H
#define PC_RAFT_LOOP_H

#include <stdbool.h>
#include <stddef.h>

struct uv_loop_s;
typedef struct raft_loop raft_loop;
typedef void (*raft_loop_fn)(void *arg);

/* How often the shared tick runs each group's tick (ms). */
#define RAFT_LOOP_TICK_MS 50

/* Start a loop and its thread. 0, or -1 with a reason in err. */
int raft_loop_start(raft_loop **out, char *err, size_t errlen);

/* Stop the loop and join its thread (not from the loop's thread: it
 * aborts). Every group on it must have stopped first (a tick still
 * registered aborts too): what was posted before still runs, then the
 * loop ends. */
void raft_loop_stop(raft_loop *l);

/* The libuv loop (its handles: the loop's thread only). */
struct uv_loop_s *raft_loop_uv(raft_loop *l);

/* Run fn(arg) on the loop's thread soon, in the order posted (any
 * thread). 0, or -1: out of memory, or the loop is stopping. */
int raft_loop_post(raft_loop *l, raft_loop_fn fn, void *arg);

/* Whether the caller runs on the loop's thread. */
bool raft_loop_on_thread(const raft_loop *l);

/* Run fn(arg) every RAFT_LOOP_TICK_MS (loop thread only), with every other
 * tick of the loop: one wakeup of the thread for all of its groups. A fn
 * may remove itself or another while it runs. 0, or -1: out of memory. */
int raft_loop_tick_add(raft_loop *l, raft_loop_fn fn, void *arg);
void raft_loop_tick_remove(raft_loop *l, void *arg);

#endif
