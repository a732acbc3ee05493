/* bench.h — `convo bench`: measures convo against the backend's raw speed. */
#ifndef CONVO_TOOL_BENCH_H
#define CONVO_TOOL_BENCH_H

/* argv[0] is "bench"; returns the tool's exit status. */
int convo_tool_bench(const char *url, int argc, char **argv);

#endif
