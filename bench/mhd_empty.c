/*
 * mhd_empty.c — the ceiling for point reads: libmicrohttpd in the service's
 * threading mode (internal polling thread, epoll, a thread pool) answering
 * every request with a fixed small JSON body, on the second call of the
 * access handler like common/httpd.c does. No routing, no storage.
 *
 *   mhd_empty PORT [THREADS]     (SIGTERM/SIGINT stop it)
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char BODY[] = "{\"key\":\"k00000000\",\"value\":\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"
                           "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\",\"commit_ts\":3}";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **ctx)
{
    static int marker;
    (void)cls; (void)url; (void)method; (void)version; (void)upload;
    if (*ctx == NULL) {
        *ctx = &marker;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY,
                                                             MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mhd_empty PORT [THREADS]\n");
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]), threads = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC, 0, NULL, NULL, on_request,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "mhd_empty: cannot listen on 127.0.0.1:%u\n", port);
        return 1;
    }
    int sig;
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    return 0;
}
