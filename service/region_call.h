/*
 * region_call.h — an action sent to the node that leads its region
 * (actions.h; docs/DESIGN.md §6.6): POST /v1/region-calls on that node's
 * HTTP address (its --raft-urls entry), with the nodes' shared secret
 * (--peer-token-file, in PEER_TOKEN_HEADER), this node's bearer token and
 * its TLS towards peers (the forwarder's), the action and its answer as
 * JSON, keys and values in base64.
 *
 * A node serves a call as its own action alone, or refuses it (rc
 * "not_leader": it does not lead the region, nothing was proposed): it
 * never passes it on, and sends nothing while it serves one (a lock a
 * read meets goes back to the sender, who resolves it), so no node's
 * workers wait on another's that wait on theirs.
 */
#ifndef PC_REGION_CALL_H
#define PC_REGION_CALL_H

#include <jansson.h>
#include <stdbool.h>

#include "actions.h"
#include "oracle_client.h"

#define REGION_CALL_PATH "/v1/region-calls"
#define REGION_CALL_MAX_ITEMS 1024   /* mutations or keys in one call */
#define REGION_CALL_MAX_SCAN 100000 /* a scan's limit (a longer one takes more calls) */
#define PEER_TOKEN_HEADER "X-Percolator-Peer-Token"

typedef struct region_calls region_calls;

/* The client: connections kept alive, one handle a caller at a time.
 * NULL with the reason in err. */
region_calls *region_calls_start(svc *s, const oc_tls *tls, char *err, size_t errlen);
void region_calls_free(region_calls *rc);

/* Whether key's region is led by another node this one heard from lately:
 * its URL in url. False on a single node, in one log, or while the
 * region's leader is this node or unknown (the action then runs here and
 * answers for itself). */
bool region_call_elsewhere(svc *s, pc_slice key, char *url, size_t len);

/* The key that says which region a is for: its first (a prewrite's
 * first mutation; a heartbeat's or a status check's primary). */
pc_slice act_key(const act_call *a);

/* How a node runs an action as its region's leader (actions.c act_here,
 * reader.c rd_here). */
typedef pc_rc (*act_here_fn)(svc *s, pc_session *ps, const act_call *a, act_answer *out);

/* Run a where its region is led: by here on this node, or sent to the
 * node that leads it. A region whose leader is being elected, or moved,
 * refuses what was not sent in time (PC_NOT_LEADER: nothing proposed):
 * asked again where its leader is now, a few times within a fraction of
 * a second. */
pc_rc region_call_route(svc *s, pc_session *ps, const act_call *a, act_answer *out,
                        act_here_fn here);

/* Send a to url and wait for the answer, in out. PC_NOT_LEADER when it
 * was not sent or the node does not lead the region; PC_UNAVAILABLE when
 * it may have run there (a time-out, a lost answer). */
pc_rc region_call(svc *s, const char *url, const act_call *a, act_answer *out);

/* The call this thread serves: its sender's run id, for whose sessions
 * live (actions.c) and to send nothing meanwhile; NULL when it is done. */
void region_call_serving(const char *run);
/* The run id of the node whose call this thread serves; NULL: none. */
const char *region_call_for_run(void);

/* ---- the wire (the route, routes_region_calls.c, uses these too) ---- */

/* A call read from a request body, with the memory its keys live in. */
typedef struct {
    act_call a;
    char run[24];             /* the caller's run id */
    uint64_t observers;       /* the digest of its observed prefixes */
    pc_mutation *m;
    pc_slice *keys;
    unsigned char *bytes;     /* every decoded key and value */
} region_call_in;

/* The call as JSON: run, the run whose sessions live (the first
 * sender's); observers, the digest of the sender's observed prefixes;
 * owner_verdict (ACT_OWNER_*), a status check's word on the owner of the
 * lock met. NULL: out of memory. */
json_t *region_call_encode(const act_call *a, const char *run, uint64_t observers,
                           int owner_verdict);

/* Decode body into in (free it with region_call_in_free, success or
 * not); false with what was wrong in why. */
bool region_call_decode(json_t *body, size_t max_value, region_call_in *in, char *why,
                        size_t whylen);
void region_call_in_free(region_call_in *in);

/* The answer of an action that returned rc, as its kind carries it. NULL:
 * out of memory. */
json_t *region_answer_encode(pc_rc rc, const act_call *a, const act_answer *out);
/* The caller's out from an answer to a; the rc it names (PC_ERROR: not an
 * answer). */
pc_rc region_answer_decode(json_t *o, const act_call *a, act_answer *out);
/* The rc pc_rc_name gives name; PC_ERROR when none does. */
pc_rc act_rc_named(const char *name);

/* The wire's pieces (region_call_wire.c), for the answer's codec too:
 * base64 of bytes as a JSON string; o[k] = v, taking v (-1: v NULL or no
 * memory); o[k] as an integer >= 0 (0 when absent; false when not one);
 * a base64 string of at most max bytes decoded at *at (advanced), its
 * bytes in out. */
json_t *rcw_b64(const void *p, size_t len);
int rcw_set(json_t *o, const char *k, json_t *v);
bool rcw_u64(json_t *o, const char *k, uint64_t *v);
bool rcw_take_b64(json_t *j, size_t max, unsigned char **at, pc_slice *out);

#endif
