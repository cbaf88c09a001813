/*
 * process_metrics.h — the standard process_* series of Prometheus client
 * libraries (resident memory, open descriptors, CPU time, start time) and
 * percolator_build_info, read from /proc when /metrics is rendered.
 */
#ifndef PERCOLATOR_PROCESS_METRICS_H
#define PERCOLATOR_PROCESS_METRICS_H

#include "buf.h"

/* Append the series in Prometheus text format. 0, or -1 out of memory
 * (what /proc cannot tell is left out). */
int process_metrics_render(buf *out);

#endif
