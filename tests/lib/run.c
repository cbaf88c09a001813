/*
 * run.c — run a program to completion with given stdin and capture its
 * stdout, stderr and exit status (testlib.h: tl_run), for testing
 * command-line programs. stdin, stdout and stderr go through temp files,
 * so no pipe can fill up and block the child.
 */
#include "testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* A temp file, already unlinked; its fd or -1. */
static int temp_fd(void)
{
    const char *dir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/tl_run.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    return fd;
}

/* The whole of fd (from its start) into a malloc'd NUL-terminated buffer. */
static char *slurp(int fd, size_t *len)
{
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0 || lseek(fd, 0, SEEK_SET) < 0)
        return NULL;
    char *p = malloc((size_t)end + 1);
    size_t got = 0;
    while (p && got < (size_t)end) {
        ssize_t n = read(fd, p + got, (size_t)end - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (p) {
        p[got] = '\0';
        *len = got;
    }
    return p;
}

static pid_t start(const char *path, const char *const args[], const char *const env[],
                   int in, int out, int err)
{
    char **argv = NULL, **envp = NULL;
    pid_t pid = -1;
    if (tl_exec_vectors(path, args, env, &argv, &envp) == 0) {
        pid_t parent = getpid();
        pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(127);
            dup2(in, STDIN_FILENO);
            dup2(out, STDOUT_FILENO);
            dup2(err, STDERR_FILENO);
            execve(path, argv, envp);
            _exit(127);
        }
    }
    free(argv);
    free(envp);
    return pid;
}

int tl_run(const char *prog, const char *const args[], const char *const env[], const void *in,
           size_t in_len, int timeout_ms, tl_run_result *r)
{
    memset(r, 0, sizeof *r);
    r->status = -1;
    char path[1024];
    if (strchr(prog, '/'))
        snprintf(path, sizeof path, "%s", prog);
    else
        snprintf(path, sizeof path, "%s/%s", tl_bin_dir(), prog);
    int fin = temp_fd(), fout = temp_fd(), ferr = temp_fd();
    int rc = -1;
    if (fin < 0 || fout < 0 || ferr < 0)
        goto done;
    if (in_len > 0 && (write(fin, in, in_len) != (ssize_t)in_len || lseek(fin, 0, SEEK_SET) < 0))
        goto done;
    pid_t pid = start(path, args, env, fin, fout, ferr);
    if (pid < 0)
        goto done;
    r->status = tl_wait_exit(pid, timeout_ms);
    if (r->status < 0) { /* still running: ours, so kill and reap it */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    r->out = slurp(fout, &r->out_len);
    r->err = slurp(ferr, &r->err_len);
    rc = r->out && r->err ? 0 : -1;
done:
    if (fin >= 0)
        close(fin);
    if (fout >= 0)
        close(fout);
    if (ferr >= 0)
        close(ferr);
    return rc;
}

void tl_run_free(tl_run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}
