/*
 * version.h — the version both programs report (--version, /metrics
 * percolator_build_info). Raised with each release.
 */
#ifndef PERCOLATOR_VERSION_H
#define PERCOLATOR_VERSION_H

#define PERCOLATOR_VERSION "1.1.0"

#endif
