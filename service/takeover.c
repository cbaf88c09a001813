/*
 * takeover.c — what a member that begins to lead reads back before it
 * serves (docs/DESIGN.md §9 item 6). Above the observers in the call
 * graph: svc_timestamps, below them, reaches this through s->take_over.
 */
#include <string.h>

#include "log.h"
#include "leases.h"
#include "observers.h"
#include "service.h"

/* The first barrier of the term is applied (ready_term is set only then),
 * so the store holds every entry any earlier leader committed: what the
 * previous leader kept in memory is read back from it here, before this
 * member hands out its first timestamp of the term or lists or claims an
 * observer's changes.
 *  - The observers' registrations: where a commit writes a notify
 *    record. Committed under another leader, they were applied here but
 *    not loaded, and every change written before a later reload would
 *    have been missed for good.
 *  - The leases (leases.h): which exist, their TTLs; each gets its whole
 *    TTL again from now, since its keep-alives went to the last leader.
 *  - The highest timestamp handed out (ts_seen, for reads at a given
 *    ts, svc_snapshot_begin): at least the store's highest.
 * The oracle's floor needs nothing here: svc_timestamps reads the store's
 * highest timestamp before every request. */
bool svc_take_over(svc *s)
{
    uint64_t term = svc_leader_term(s);
    if (term == 0) {
        /* A member that leads but has not applied its first barrier yet
         * may hold an old leader's state: it hands out nothing (the
         * caller answers 503 not_leader, retried), or a write it computed
         * now (without the observers' registrations) could still be
         * proposed once the barrier is in. A follower has nothing to take
         * over: its proposals are refused anyway. */
        return svc_leadership_of(s, NULL) != SVC_LEADS_NOT_READY;
    }
    if (atomic_load(&s->served_term) == term)
        return true;
    bool ok = true;
    pthread_mutex_lock(&s->takeover_mu);
    if (atomic_load(&s->served_term) != term) {
        pc_session *ps = svc_engine_session(s);
        uint64_t max = pc_store_max_ts(s->engine);
        ok = ps != NULL && observers_load(s, ps) && leases_load(s, ps, term);
        if (ok) {
            uint64_t seen = atomic_load(&s->ts_seen);
            while (seen < max && !atomic_compare_exchange_weak(&s->ts_seen, &seen, max))
                ;
            atomic_store(&s->served_term, term);
            log_info("service: leading in term %llu: the store's highest timestamp is %llu, "
                     "the observers' registrations and the leases are loaded",
                     (unsigned long long)term, (unsigned long long)max);
        } else {
            log_error("service: leading in term %llu, but the observers' registrations or the "
                      "leases could not be read: no timestamp is handed out until they are",
                      (unsigned long long)term);
        }
    }
    pthread_mutex_unlock(&s->takeover_mu);
    return ok;
}
