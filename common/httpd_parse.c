/*
 * httpd_parse.c — the HTTP server's text parsing: percent-decoding, a
 * matched route's path parameters and the query string (into the
 * request's scratch), and "host:port" listen addresses.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd_internal.h"

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long httpd_percent_decode(const char *src, size_t len, char *dst, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len) /* need two hex digits after '%' */
                return -1;
            int hi = hexval((unsigned char)src[i + 1]);
            int lo = hexval((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            dst[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (plus_space && c == '+') {
            dst[o++] = ' ';
        } else {
            dst[o++] = c;
        }
    }
    dst[o] = '\0';
    return (long)o;
}

int httpd_parse_listen(const char *listen, struct sockaddr_storage *addr,
                       socklen_t *addrlen, char *err, size_t errlen)
{
    char host[256], port[16];
    const char *colon;
    if (!listen || !*listen) {
        snprintf(err, errlen, "empty listen address (want host:port)");
        return -1;
    }
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':') {
            snprintf(err, errlen, "bad listen address '%.100s' (want [v6addr]:port)", listen);
            return -1;
        }
        colon = close + 1;
        size_t hl = (size_t)(close - listen - 1);
        if (hl >= sizeof host) goto bad;
        memcpy(host, listen + 1, hl);
        host[hl] = '\0';
    } else {
        colon = strrchr(listen, ':');
        if (!colon) goto bad;
        size_t hl = (size_t)(colon - listen);
        if (hl >= sizeof host) goto bad;
        memcpy(host, listen, hl);
        host[hl] = '\0';
        if (strchr(host, ':')) goto bad; /* bare IPv6 needs brackets */
    }
    {
        const char *p = colon + 1;
        size_t pl = strlen(p);
        if (pl == 0 || pl > 5 || strspn(p, "0123456789") != pl || atol(p) > 65535)
            goto bad;
        memcpy(port, p, pl + 1);
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve listen host '%.100s': %s", host, gai_strerror(rc));
        if (res) freeaddrinfo(res);
        return -1;
    }
    if (res->ai_addrlen > sizeof *addr) {
        freeaddrinfo(res);
        goto bad;
    }
    memset(addr, 0, sizeof *addr);
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *addrlen = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
bad:
    snprintf(err, errlen, "bad listen address '%.100s' (want host:port, port 0..65535)", listen);
    return -1;
}

/* Decode the matched route's {param} segments into scratch. */
int httpd_decode_params(httpd_req *rq, char **out)
{
    const route *r = rq->route;
    const char *path = rq->uri;
    size_t i = 1;
    for (int k = 0; k < r->nseg; k++) {
        const char *slash = memchr(path + i, '/', rq->path_len - i);
        size_t len = slash && !r->seg[k].rest ? (size_t)(slash - (path + i)) : rq->path_len - i;
        if (r->seg[k].is_param) {
            long n = httpd_percent_decode(path + i, len, *out, false);
            if (n < 0)
                return -1;
            kv *p = &rq->params[rq->nparams++];
            p->key = r->seg[k].text;
            p->klen = strlen(p->key);
            p->val = *out;
            p->vlen = (size_t)n;
            *out += n + 1;
        }
        i += len + 1;
    }
    return 0;
}

/* Split and decode "a=1&b=x%20y" into rq->query. */
int httpd_decode_query(httpd_req *rq, char **out)
{
    const char *q = rq->query_str;
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > 0 && rq->nquery < MAX_QUERY) {
            const char *eq = memchr(q, '=', len);
            size_t klen = eq ? (size_t)(eq - q) : len;
            kv *p = &rq->query[rq->nquery];
            long kn = httpd_percent_decode(q, klen, *out, true);
            if (kn < 0)
                return -1;
            p->key = *out;
            p->klen = (size_t)kn;
            *out += kn + 1;
            long vn = eq ? httpd_percent_decode(eq + 1, len - klen - 1, *out, true)
                         : httpd_percent_decode("", 0, *out, true);
            if (vn < 0)
                return -1;
            p->val = *out;
            p->vlen = (size_t)vn;
            *out += vn + 1;
            rq->nquery++;
        }
        q += len;
        if (*q == '&')
            q++;
    }
    return 0;
}
