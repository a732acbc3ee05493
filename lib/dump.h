/* dump.h — shared by lib/export.c, lib/import.c and lib/dump.c (convo_copy). */
#ifndef CONVO_LIB_DUMP_H
#define CONVO_LIB_DUMP_H

#include "internal.h"
#include <stdint.h>

#define DUMP_MAGIC "convo-dump"
/* 2: the thread record carries the thread's generation; 1 is still read. */
#define DUMP_VERSION 2

/* The checksum of a frame's record (FNV-1a, 64 bits). */
uint64_t convo__dump_hash(const void *data, size_t len);
/* Calls opts->progress, when set, with stats. */
void convo__dump_report(const convo_dump_opts *opts, const convo_dump_stats *stats);

#endif
