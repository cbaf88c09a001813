/*
 * raft_fsm.h — the oracle's replicated state machine (docs/DESIGN.md §7,
 * §6.3).
 *
 * The state is the high-water mark, the highest timestamp any leader has
 * handed out or may still hand out, and the placement driver's map
 * (oracle/pd_map.h: the service nodes and the regions). The mark's only
 * command is "advance by n": applying it hands the range hwm+1 .. hwm+n to
 * whoever proposed it, and raises the mark by n. Every node applies the
 * same commands in the same order, so every node agrees on the mark, and a
 * range is handed out only once its command is committed by a quorum: the
 * commit is both the reservation and the proof of leadership (a leader
 * that lost its quorum cannot commit, so it hands out nothing).
 *
 * A command is an 8-byte tag, then its bytes: "oracADV1" n (the mark);
 * "oracPDN1", "oracPDI1", "oracPDR1" (the map's node, ids and regions
 * commands), each followed by the length of its bytes, the bytes and
 * zeros to a multiple of 8 bytes. An image is the mark alone (8 bytes: what members before the
 * placement driver wrote, still read) or "oracSNP2", the mark, the map.
 */
#ifndef PC_RAFT_FSM_H
#define PC_RAFT_FSM_H

#include <raft.h>
#include <stdint.h>

#include "buf.h"
#include "pd_map.h"

#define ORACLE_FSM_MAX_TS ((UINT64_C(1) << 53) - 1) /* JSON-safe, as tso.h */

typedef struct {
    uint64_t hwm;       /* everything at or below it is taken */
    uint64_t applied;   /* commands applied (for tests and health) */
    pd_map *pd;         /* the placement driver's map (not owned); NULL: none, its
                           commands are refused and images carry the mark alone */
} oracle_fsm_state;

/* Set fsm up over st (version 1: apply, snapshot, restore); pd may be NULL. */
void oracle_fsm_init(struct raft_fsm *fsm, oracle_fsm_state *st, pd_map *pd);

/* The command "advance by n" as a buffer for raft_apply (raft_malloc'd;
 * ownership passes to raft_apply on success). -1 when out of memory. */
int oracle_fsm_command(uint64_t n, struct raft_buffer *out);

/* The placement driver's commands (pd_map.h). */
typedef enum { ORACLE_PD_NODE, ORACLE_PD_IDS, ORACLE_PD_REGIONS } oracle_pd_cmd;

/* A placement-driver command (its bytes made by pd_cmd_*) as a buffer for
 * raft_apply, as above. -1 when out of memory. */
int oracle_fsm_pd_command(oracle_pd_cmd cmd, const buf *bytes, struct raft_buffer *out);

/* Free a command that was never handed to raft_apply. */
void oracle_fsm_command_free(struct raft_buffer *buf);

/* What applying a command gave (the `result` of raft_apply's callback):
 * "advance": the first timestamp of the range, 0 when the command was
 * refused (the mark would pass ORACLE_FSM_MAX_TS) or malformed; a
 * placement-driver command: what pd_apply_* returned. */
static inline uint64_t oracle_fsm_first(void *result)
{
    return (uint64_t)(uintptr_t)result;
}

#endif
