/* threads.h — `convo threads`: thread ids in byte order (convo_thread_list), or
 * the thread index (convo_thread_list_ex) with a filter, an order and a summary
 * per thread. Returns the exit status. */
#ifndef CONVO_TOOL_THREADS_H
#define CONVO_TOOL_THREADS_H

#include "cli.h"

int convo_tool_threads(convo_store *s, const invocation *inv);

#endif
