/*
 * watch_client.h — a client of GET /v1/watch for the tests: the stream is
 * read on a thread of its own (libcurl, following a follower's 307), each
 * line parsed and kept, as a client would.
 *
 * Lines are kept in two lists: `lines` (everything, in arrival order) and
 * `settled` (the change lines up to the last progress line: what a client
 * that resumes from its last resolved_ts may rely on; the changes after it
 * are sent again on a resume, docs/DESIGN.md §10).
 */
#ifndef PC_TL_WATCH_CLIENT_H
#define PC_TL_WATCH_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct tl_watch tl_watch;

/* GET url (http://HOST:PORT/v1/watch?...) on a thread; bounded by
 * timeout_ms in all. NULL when it cannot start. */
tl_watch *tl_watch_start(const char *url, int timeout_ms);
/* Stop reading (aborts the transfer), join, free. NULL is fine. */
void tl_watch_stop(tl_watch *w);

/* The highest resolved_ts of a progress line (0: none yet). */
uint64_t tl_watch_progress(tl_watch *w);
/* Wait until a progress line reaches ts or the stream ended; whether it did. */
bool tl_watch_wait_progress(tl_watch *w, uint64_t ts, int ms);
/* Whether the stream ended (closed by the server, or failed), and the
 * HTTP status it got (0: none). */
bool tl_watch_ended(tl_watch *w, long *status);
/* Copies (caller decrefs): every line; the settled change lines. */
json_t *tl_watch_lines(tl_watch *w);
json_t *tl_watch_settled(tl_watch *w);
/* The last line's error code if it was an error line, else NULL (static
 * copy valid until the next call on w). */
const char *tl_watch_error(tl_watch *w, uint64_t *resume_ts);

#endif
