/* rewrite.h — `convo pop` and `convo replace-tail`: the tool's two commands
 * that rewrite a thread's tail (convo_replace_tail). Each returns the exit status. */
#ifndef CONVO_TOOL_REWRITE_H
#define CONVO_TOOL_REWRITE_H

#include "cli.h"

int convo_tool_pop(convo_store *s, const invocation *inv);
int convo_tool_replace_tail(convo_store *s, const invocation *inv);

#endif
