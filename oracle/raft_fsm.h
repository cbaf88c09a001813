/*
 * raft_fsm.h — the oracle's replicated state machine (docs/DESIGN.md §7).
 *
 * The state is one number: the high-water mark, the highest timestamp any
 * leader has handed out or may still hand out. Its only command is
 * "advance by n": applying it hands the range hwm+1 .. hwm+n to whoever
 * proposed it, and raises the mark by n. Every node applies the same
 * commands in the same order, so every node agrees on the mark, and a
 * range is handed out only once its command is committed by a quorum: the
 * commit is both the reservation and the proof of leadership (a leader
 * that lost its quorum cannot commit, so it hands out nothing).
 */
#ifndef PC_RAFT_FSM_H
#define PC_RAFT_FSM_H

#include <raft.h>
#include <stdint.h>

#define ORACLE_FSM_MAX_TS ((UINT64_C(1) << 53) - 1) /* JSON-safe, as tso.h */

typedef struct {
    uint64_t hwm;       /* everything at or below it is taken */
    uint64_t applied;   /* commands applied (for tests and health) */
} oracle_fsm_state;

/* Set fsm up over st (version 1: apply, snapshot, restore). */
void oracle_fsm_init(struct raft_fsm *fsm, oracle_fsm_state *st);

/* The command "advance by n" as a buffer for raft_apply (raft_malloc'd;
 * ownership passes to raft_apply on success). -1 when out of memory. */
int oracle_fsm_command(uint64_t n, struct raft_buffer *out);

/* What applying a command gave (the `result` of raft_apply's callback):
 * the first timestamp of the range, 0 when the command was refused (the
 * mark would pass ORACLE_FSM_MAX_TS) or malformed. */
static inline uint64_t oracle_fsm_first(void *result)
{
    return (uint64_t)(uintptr_t)result;
}

#endif
