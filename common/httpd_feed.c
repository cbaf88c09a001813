/*
 * httpd_feed.c — replies that go on (httpd_reply_feed): a chunked body
 * made as its owner has something to send, for change streams.
 *
 * MHD asks for the body when the socket can take more. When the owner has
 * nothing, the connection is suspended (MHD allows it from a content
 * reader) and resumed by httpd_feed_wake, so an idle stream costs no
 * polling. The one race — a wake between "nothing" and the suspension —
 * is closed by the feed's lock and its `woken` flag: a wake that came
 * while read ran resumes the connection right after it is suspended.
 */
#include <stdlib.h>

#include "httpd_internal.h"
#include "log.h"

struct httpd_feed {
    httpd *h;
    httpd_feed *prev, *next;      /* h->feeds */
    pthread_mutex_t mu;
    struct MHD_Connection *conn;  /* once MHD has the response */
    bool parked;                  /* the connection is suspended */
    bool woken;                   /* a wake came since read was last called */
    bool ended;                   /* the body's end was given to MHD */
    long (*read)(void *, char *, size_t);
    void (*done)(void *);
    void *arg;
};

httpd_feed *httpd_reply_feed(httpd_req *rq, unsigned status, const char *content_type,
                             long (*read)(void *arg, char *buf, size_t max),
                             void (*done)(void *arg), void *arg)
{
    httpd *h = rq->h;
    if (rq->replied) {
        log_warn("httpd: second reply for %s %.80s ignored", rq->method, rq->uri);
        done(arg);
        return NULL;
    }
    httpd_feed *f = calloc(1, sizeof *f);
    if (f == NULL) {
        done(arg);
        httpd_reply_error(rq, 500, "internal", NULL, "out of memory for a stream");
        return NULL;
    }
    f->h = h;
    f->read = read;
    f->done = done;
    f->arg = arg;
    pthread_mutex_init(&f->mu, NULL);
    pthread_mutex_lock(&h->feeds_mu);
    f->next = h->feeds;
    if (h->feeds != NULL)
        h->feeds->prev = f;
    h->feeds = f;
    pthread_mutex_unlock(&h->feeds_mu);
    httpd_reply_stream(rq, status, content_type, MHD_SIZE_UNKNOWN, httpd_feed_read,
                       httpd_feed_done, f);
    rq->stream_feed = f;
    return f;
}

void httpd_feed_attach(httpd_feed *f, struct MHD_Connection *conn)
{
    pthread_mutex_lock(&f->mu);
    f->conn = conn;
    pthread_mutex_unlock(&f->mu);
}

/* MHD's event thread. -2: the end of the body. A stopping server ends
 * the body once the owner has nothing more (its last lines go out). */
long httpd_feed_read(void *feed, uint64_t pos, char *buf, size_t max)
{
    httpd_feed *f = feed;
    (void)pos;
    pthread_mutex_lock(&f->mu);
    bool ended = f->ended;
    f->woken = false;
    pthread_mutex_unlock(&f->mu);
    if (ended)
        return -2;
    long n = f->read(f->arg, buf, max);
    if (n > 0)
        return n;
    pthread_mutex_lock(&f->mu);
    if (n < 0 || atomic_load(&f->h->stopping)) {
        f->ended = true;
    } else {
        f->parked = true;
        MHD_suspend_connection(f->conn);
        /* Woken while read ran: go on at once. */
        if (f->woken) {
            f->parked = false;
            MHD_resume_connection(f->conn);
        }
    }
    bool end = f->ended;
    pthread_mutex_unlock(&f->mu);
    return end ? -2 : 0;
}

void httpd_feed_wake(httpd_feed *f)
{
    pthread_mutex_lock(&f->mu);
    f->woken = true;
    if (f->parked) {
        f->parked = false;
        MHD_resume_connection(f->conn);
    }
    pthread_mutex_unlock(&f->mu);
}

/* The reply is over: off the list, the owner told, freed. */
void httpd_feed_done(void *feed)
{
    httpd_feed *f = feed;
    httpd *h = f->h;
    pthread_mutex_lock(&h->feeds_mu);
    if (f->prev != NULL)
        f->prev->next = f->next;
    else
        h->feeds = f->next;
    if (f->next != NULL)
        f->next->prev = f->prev;
    pthread_mutex_unlock(&h->feeds_mu);
    f->done(f->arg);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void httpd_feeds_stop(httpd *h)
{
    pthread_mutex_lock(&h->feeds_mu);
    for (httpd_feed *f = h->feeds; f != NULL; f = f->next)
        httpd_feed_wake(f); /* read sees the stop and ends the body */
    pthread_mutex_unlock(&h->feeds_mu);
}
