/* bench.h — `convo bench`: measures convo against the backend's raw speed. */
#ifndef CONVO_TOOL_BENCH_H
#define CONVO_TOOL_BENCH_H

#include <convo.h>
#include <stddef.h>

/* argv[0] is "bench"; returns the tool's exit status. */
int convo_tool_bench(const char *url, int argc, char **argv);

/* ---- shared by the scenarios (bench.c) ---- */
double bench_now(void);
/* "\rWHAT: DONE/TOTAL" on stderr when it is a terminal, at most 5 times a second. */
void bench_progress(const char *what, size_t done, size_t total);
/* A {"role":ROLE,"content":"..."} message with payload bytes of text; malloc'd. */
char *bench_message(const char *role, size_t payload, unsigned *seed);
/* A name unique to this run (hex: time and pid). */
const char *bench_run_id(void);

/* ---- the thread index scenario (bench_threads.c) ---- */
typedef struct bench_threads_opts {
    size_t threads;  /* threads at the end (default 100,000) */
    size_t users;    /* their users (default 1,000) */
    size_t messages; /* appended to each thread, one call each (default 3) */
    size_t pages;    /* page reads measured at each size (default 200) */
    size_t payload;  /* bytes of text per message */
    int json;
} bench_threads_opts;

int bench_threads(const char *url, const bench_threads_opts *o, convo_error *err);

/* ---- the conversation as LangGraph's runtime writes it (bench_graph.c) ---- */
int bench_graph(const char *url, size_t turns, size_t payload, int json, convo_error *err);

#endif
