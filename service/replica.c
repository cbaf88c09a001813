/*
 * replica.c — what the service does differently as one member of a Raft
 * group (raft_group.h; docs/DESIGN.md §9): proposing what every engine
 * call that may write produced, the fence before reads, leadership for the
 * background work, and where a follower sends its clients. A single node
 * goes through here at the cost of one branch.
 */
#include <string.h>

#include "log.h"
#include "service.h"

#define PROPOSE_WAIT_MS 5000  /* while queued; once proposed libraft answers */

static _Thread_local rg_rc refusal;

rg_rc svc_refusal(void)
{
    rg_rc r = refusal;
    refusal = RG_OK;
    return r;
}

/* The calling thread's batch, between svc_write_begin and svc_write_end
 * (each thread runs one action at a time); freed at the end, so a thread
 * that exits holds nothing. */
static _Thread_local pc_buf batch;

/* No gate: the engine latches the keys of each action in propose mode
 * (DESIGN §4.10), so actions on other keys read, propose and wait for
 * their apply alongside this one, and Raft puts their entries in one
 * append. */
void svc_write_begin(svc *s, pc_session *ps)
{
    if (!svc_replicated(s))
        return;
    batch.len = 0;
    pc_session_propose(ps, &batch);
}

pc_rc svc_write_end(svc *s, pc_session *ps, pc_rc rc, bool *proposed)
{
    if (proposed != NULL)
        *proposed = false;
    if (!svc_replicated(s))
        return rc;
    /* The latches (and the commits in flight handed over to them) stay
     * until the batch is applied here or could not be committed: the next
     * action on these keys then reads a store that holds this one. */
    pc_latches *held = pc_session_take_latches(ps);
    pc_session_propose(ps, NULL);
    /* An action that changed nothing has nothing to replicate. */
    if (batch.len > 0) {
        rg_rc r = raft_group_propose(s->raft, batch.data, batch.len, PROPOSE_WAIT_MS);
        refusal = r;
        if (r != RG_OK)
            rc = PC_ERROR;
        else if (proposed != NULL)
            *proposed = true;
    }
    pc_latches_release(held);
    pc_buf_free(&batch);
    return rc;
}

pc_rc svc_read_fence(svc *s)
{
    if (!svc_replicated(s))
        return PC_OK;
    /* The barrier proves this member still leads and that everything
     * committed before the read arrived is applied here. A commit below
     * the read's timestamp that is not applied yet is still in the table
     * of commits in flight (a one-phase commit, a commit point: their
     * latches keep it there until the apply) or leaves its lock in the
     * store (two-phase secondaries), so the read meets it and waits. */
    rg_rc r = raft_group_read_barrier(s->raft, PROPOSE_WAIT_MS);
    refusal = r;
    return r == RG_OK ? PC_OK : PC_ERROR;
}

bool svc_leads(svc *s)
{
    return !svc_replicated(s) || svc_leader_term(s) != 0;
}

uint64_t svc_leader_term(svc *s)
{
    if (!svc_replicated(s))
        return 0;
    raft_group_status st;
    raft_group_get_status(s->raft, &st);
    return st.ready_term;
}

/* Every /v1 request but health and readiness (public routes, which httpd
 * never asks about) is served by the leader: a follower answers 307 to
 * the leader's URL, which curl -L follows with the same method and body,
 * or 503 not_leader while it knows of no leader. */
bool svc_elsewhere(const httpd_req *req, void *ctx, httpd_elsewhere *out)
{
    svc *s = ctx;
    if (!svc_replicated(s) || strncmp(httpd_path(req), "/v1/", 4) != 0)
        return false;
    raft_group_status st;
    raft_group_get_status(s->raft, &st);
    if (strcmp(st.role, "leader") == 0)
        return false; /* a leader still waiting for its first barrier answers 503 itself */
    out->code = "not_leader";
    if (st.leader_id != 0 && st.leader_http[0] != '\0') {
        snprintf(out->location, sizeof out->location, "%s", st.leader_http);
        snprintf(out->message, sizeof out->message,
                 "this member is a follower: the leader is member %u at %s", st.leader_id,
                 st.leader_http);
    } else {
        snprintf(out->message, sizeof out->message,
                 "this member is not the leader and knows of none yet (an election may be "
                 "under way)");
    }
    return true;
}
