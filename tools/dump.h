/* dump.h — `convo export`, `import` and `copy`. Each returns the exit status. */
#ifndef CONVO_TOOL_DUMP_H
#define CONVO_TOOL_DUMP_H

#include <convo.h>

/* quiet (--quiet): no progress on a terminal, no summary line on stderr */
int convo_tool_export(convo_store *s, int nthreads, char **threads, int quiet);
int convo_tool_import(convo_store *s, int quiet);
int convo_tool_copy(const char *src_url, const char *dst_url, int nthreads, char **threads,
                    int quiet);

#endif
