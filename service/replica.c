/*
 * replica.c — what the service does differently as one member of a Raft
 * group (raft_group.h; docs/DESIGN.md §9): the write gate around every
 * engine call that may write, the fence before reads, leadership for the
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

/* The gate is one mutex for now: per-key latches in the engine will
 * replace it (only these two functions change). */
void svc_write_begin(svc *s, pc_session *ps)
{
    if (!svc_replicated(s))
        return;
    pthread_mutex_lock(&s->write_gate);
    s->gate_batch.len = 0;
    pc_session_propose(ps, &s->gate_batch);
}

pc_rc svc_write_end(svc *s, pc_session *ps, pc_rc rc, bool *proposed)
{
    if (proposed != NULL)
        *proposed = false;
    if (!svc_replicated(s))
        return rc;
    pc_session_propose(ps, NULL);
    /* An action that changed nothing has nothing to replicate. */
    if (s->gate_batch.len > 0) {
        rg_rc r = raft_group_propose(s->raft, s->gate_batch.data, s->gate_batch.len,
                                     PROPOSE_WAIT_MS);
        refusal = r;
        if (r != RG_OK)
            rc = PC_ERROR;
        else if (proposed != NULL)
            *proposed = true;
        s->gate_batch.len = 0;
    }
    pthread_mutex_unlock(&s->write_gate);
    return rc;
}

pc_rc svc_read_fence(svc *s)
{
    if (!svc_replicated(s))
        return PC_OK;
    /* A writing action holds the gate from before it takes its commit
     * timestamp until its batch is applied: once the gate is free, every
     * commit below a timestamp taken before this read is applied here. */
    pthread_mutex_lock(&s->write_gate);
    pthread_mutex_unlock(&s->write_gate);
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
