/* newdb.h — a SQLite file the tool created for a command that failed is removed. */
#ifndef CONVO_TOOL_NEWDB_H
#define CONVO_TOOL_NEWDB_H

#include <convo.h>

/* The file a sqlite: URL names when it does not exist yet (opening the store will
 * create it), else NULL (another scheme, :memory:, a file already there). Free it. */
char *newdb_path(const char *url);
/* After a failed command: when the store holds no thread, closes it (*s = NULL) and
 * removes path with its -wal, -shm and -journal files. NULL path: nothing to do. */
void newdb_discard(const char *path, convo_store **s);

#endif
