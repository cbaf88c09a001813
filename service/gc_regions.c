/*
 * gc_regions.c — see gc_regions.h.
 */
#include "gc_regions.h"

#include "actions.h"
#include "log.h"
#include "timeutil.h"

/* A node that leads a region may not have applied the safe point yet (it
 * came by region 1's log): it answers unavailable until it has. */
#define NOT_APPLIED_TRIES 20
#define NOT_APPLIED_WAIT_MS 50

/* Walk every key with calls of one kind, each answering where the next
 * starts: from the empty key until an answer says nothing is left. Every
 * next key must lie past the one asked about, so the walk ends whatever
 * a peer answers. */
static pc_rc walk_regions(svc *s, pc_session *ps, act_kind kind, uint64_t ts, uint64_t *oldest,
                          pc_gc_stats *st)
{
    pc_buf at = {0}, next = {0};
    pc_rc rc = PC_OK;
    for (bool last = false; rc == PC_OK && !last;) {
        pc_slice key = {at.len > 0 ? at.data : "", at.len};
        act_call a = {.kind = kind, .keys = &key, .n = 1, .ts = ts};
        uint64_t found = 0;
        pc_gc_stats part = {0}; /* counted once the call answered ok (a retry runs again) */
        act_answer out = {.commit_ts = &found, .gc = &part, .next = &next, .last = &last};
        rc = act_run(s, ps, &a, &out);
        for (int t = 1; rc == PC_UNAVAILABLE && kind == ACT_GC && t < NOT_APPLIED_TRIES; t++) {
            time_sleep_ms(NOT_APPLIED_WAIT_MS);
            part = (pc_gc_stats){0};
            rc = act_run(s, ps, &a, &out);
        }
        if (rc != PC_OK)
            break;
        st->keys += part.keys;
        st->versions += part.versions;
        st->versions_removed += part.versions_removed;
        st->data_removed += part.data_removed;
        if (found != 0 && found < *oldest)
            *oldest = found;
        bool forward = next.len > 0 && pc_key_cmp(next.data, next.len, key.data, key.len) > 0;
        if (!last && !forward) {
            log_warn("gc: a %s call answered a next key not past the one asked about",
                     act_name(kind));
            rc = PC_ERROR;
            break;
        }
        pc_buf tmp = at;
        at = next;
        next = tmp;
    }
    pc_buf_free(&at);
    pc_buf_free(&next);
    return rc;
}

pc_rc gc_regions_oldest_lock(svc *s, pc_session *ps, uint64_t *oldest)
{
    pc_gc_stats unused = {0};
    *oldest = UINT64_MAX;
    return walk_regions(s, ps, ACT_OLDEST_LOCK, 0, oldest, &unused);
}

pc_rc gc_regions_collect(svc *s, pc_session *ps, uint64_t safe_point, pc_gc_stats *st)
{
    uint64_t unused = UINT64_MAX;
    return walk_regions(s, ps, ACT_GC, safe_point, &unused, st);
}
