/* segments.h — layout 17's SQL function convo_sealed() (segments.c), which
 * every connection registers and tests/sqlite-sql.c registers on its own. */
#ifndef CONVO_SQLITE_SEGMENTS_H
#define CONVO_SQLITE_SEGMENTS_H

#include <sqlite3.h>

int sq_segments_register(sqlite3 *db);

#endif
