/*
 * timeutil.h — clocks used across both programs.
 *
 * Monotonic time for durations and deadlines (never jumps with the wall
 * clock); wall time only for what people read (logs) or what must make sense
 * across processes.
 */
#ifndef PERCOLATOR_TIMEUTIL_H
#define PERCOLATOR_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

uint64_t time_mono_ns(void);
uint64_t time_mono_ms(void);
uint64_t time_wall_ms(void);          /* milliseconds since the Unix epoch */
void time_sleep_ms(unsigned ms);      /* sleeps the full time, across EINTR */
/* ms from now on clock (CLOCK_MONOTONIC, CLOCK_REALTIME), for a timed wait
 * (pthread_cond_timedwait on a condition variable of that clock). */
struct timespec time_deadline(clockid_t clock, unsigned ms);

#endif
