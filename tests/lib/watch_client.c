/*
 * watch_client.c — see watch_client.h.
 */
#include "watch_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "timeutil.h"

struct tl_watch {
    char url[8192];
    int timeout_ms;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    buf partial;                  /* a line not yet whole */
    json_t *lines, *settled, *pending;
    uint64_t progress;
    bool ended;
    long status;
    char error[64];
    uint64_t resume_ts;
};

static void take_line(tl_watch *w, const char *p, size_t n)
{
    json_t *j = json_loadb(p, n, 0, NULL);
    if (j == NULL)
        j = json_pack("{s:s,s:s%}", "type", "unparsable", "text", p, n);
    const char *type = json_string_value(json_object_get(j, "type"));
    json_array_append(w->lines, j);
    if (type != NULL && strcmp(type, "progress") == 0) {
        uint64_t ts = (uint64_t)json_integer_value(json_object_get(j, "resolved_ts"));
        if (ts > w->progress)
            w->progress = ts;
        json_array_extend(w->settled, w->pending);
        json_array_clear(w->pending);
    } else if (type != NULL && (strcmp(type, "put") == 0 || strcmp(type, "delete") == 0)) {
        json_array_append(w->pending, j);
    } else if (type != NULL && strcmp(type, "error") == 0) {
        json_t *e = json_object_get(j, "error");
        snprintf(w->error, sizeof w->error, "%s",
                 json_string_value(json_object_get(e, "code")) ?: "?");
        w->resume_ts = (uint64_t)json_integer_value(json_object_get(e, "resume_ts"));
    }
    json_decref(j);
    pthread_cond_broadcast(&w->cv);
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
    tl_watch *w = arg;
    size_t n = size * nmemb;
    pthread_mutex_lock(&w->mu);
    buf_append(&w->partial, p, n);
    char *start = w->partial.data, *end = w->partial.data + w->partial.len, *nl;
    while (start < end && (nl = memchr(start, '\n', (size_t)(end - start))) != NULL) {
        take_line(w, start, (size_t)(nl - start));
        start = nl + 1;
    }
    size_t rest = (size_t)(end - start);
    memmove(w->partial.data, start, rest);
    w->partial.len = rest;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((tl_watch *)arg)->stop) ? 1 : 0;
}

static void *watch_main(void *arg)
{
    tl_watch *w = arg;
    CURL *e = curl_easy_init();
    long status = 0;
    if (e != NULL) {
        curl_easy_setopt(e, CURLOPT_URL, w->url);
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, w);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_perform(e);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(e);
    }
    pthread_mutex_lock(&w->mu);
    w->ended = true;
    w->status = status;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

tl_watch *tl_watch_start(const char *url, int timeout_ms)
{
    tl_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(w->url, sizeof w->url, "%s", url);
    w->timeout_ms = timeout_ms;
    w->lines = json_array();
    w->settled = json_array();
    w->pending = json_array();
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        json_decref(w->lines);
        json_decref(w->settled);
        json_decref(w->pending);
        free(w);
        return NULL;
    }
    return w;
}

void tl_watch_stop(tl_watch *w)
{
    if (w == NULL)
        return;
    atomic_store(&w->stop, true);
    pthread_join(w->thread, NULL); /* heap only: not a test's thread (testlib.h) */
    json_decref(w->lines);
    json_decref(w->settled);
    json_decref(w->pending);
    buf_free(&w->partial);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

uint64_t tl_watch_progress(tl_watch *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t p = w->progress;
    pthread_mutex_unlock(&w->mu);
    return p;
}

bool tl_watch_wait_progress(tl_watch *w, uint64_t ts, int ms)
{
    struct timespec until = time_deadline(CLOCK_REALTIME, (unsigned)ms);
    pthread_mutex_lock(&w->mu);
    while (w->progress < ts && !w->ended &&
           pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
        ;
    bool ok = w->progress >= ts;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

bool tl_watch_ended(tl_watch *w, long *status)
{
    pthread_mutex_lock(&w->mu);
    bool ended = w->ended;
    if (status != NULL)
        *status = w->status;
    pthread_mutex_unlock(&w->mu);
    return ended;
}

json_t *tl_watch_lines(tl_watch *w)
{
    pthread_mutex_lock(&w->mu);
    json_t *c = json_deep_copy(w->lines);
    pthread_mutex_unlock(&w->mu);
    return c;
}

json_t *tl_watch_settled(tl_watch *w)
{
    pthread_mutex_lock(&w->mu);
    json_t *c = json_deep_copy(w->settled);
    pthread_mutex_unlock(&w->mu);
    return c;
}

const char *tl_watch_error(tl_watch *w, uint64_t *resume_ts)
{
    pthread_mutex_lock(&w->mu);
    const char *e = w->error[0] ? w->error : NULL;
    if (resume_ts != NULL)
        *resume_ts = w->resume_ts;
    pthread_mutex_unlock(&w->mu);
    return e;
}
