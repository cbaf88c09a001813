/*
 * signals.h — how both programs stop: SIGTERM and SIGINT are blocked in
 * every thread and taken synchronously by the main thread, so the stop
 * sequence runs as ordinary code (stop accepting, finish requests, close).
 */
#ifndef PERCOLATOR_SIGNALS_H
#define PERCOLATOR_SIGNALS_H

#include <signal.h>

/* Block SIGTERM and SIGINT (call before any thread starts: threads inherit
 * the mask) and ignore SIGPIPE. */
void stop_signals_block(sigset_t *set);

/* Wait for one of them; returns the signal. */
int stop_signals_wait(const sigset_t *set);

#endif
