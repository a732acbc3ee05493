/* scripts.c — the driver's Lua scripts, each joined from the .lua files of
 * drivers/redis that make it (lua.h, made from them by scripts/embed.sh,
 * defines each file as LUA_<NAME>). Every script but append.lua starts with
 * prelude.lua; those that write a thread go on with rec_time.lua and
 * index.lua (append.lua starts with them); the checkpoint scripts go on
 * with cp_prelude.lua, and those
 * that give a checkpoint its order with checkpoint.lua. Loaded by SCRIPT LOAD
 * on every new connection (conn.c). */
#include "redis_int.h"
#include "drivers/redis/lua.h"

#define LUA_CP LUA_PRELUDE LUA_CP_PRELUDE
#define LUA_CP_ORDER LUA_CP_PRELUDE LUA_CHECKPOINT
#define LUA_IX LUA_PRELUDE LUA_REC_TIME LUA_INDEX

const char *const convo__rd_scripts[S_COUNT] = {
    [S_APPEND] = LUA_REC_TIME LUA_INDEX LUA_APPEND,
    [S_APPEND_FAST] = LUA_APPEND_FAST,
    [S_EXTRA] = LUA_IX LUA_EXTRA,
    [S_DELETE] = LUA_IX LUA_DELETE,
    [S_FORK] = LUA_IX LUA_FORK,
    [S_IMPORT] = LUA_IX LUA_IMPORT,
    [S_CP_PUT] = LUA_IX LUA_CP_ORDER LUA_CP_PUT,
    [S_CP_PUT_LOG] = LUA_IX LUA_CP_ORDER LUA_PUT_LOG_STEPS LUA_PUT_LOG,
    [S_CP_PUT_REFS] = LUA_IX LUA_CP_ORDER LUA_PUT_LOG_STEPS LUA_SWAPS LUA_PUT_REFS,
    [S_CP_MIGRATE] = LUA_PRELUDE LUA_CP_ORDER LUA_CP_MIGRATE,
    [S_CP_WRITES] = LUA_CP LUA_CP_WRITES,
    [S_CP_GET] = LUA_CP LUA_CP_GET,
    [S_CP_LIST] = LUA_CP LUA_CP_LIST,
    [S_CP_PRUNE] = LUA_CP LUA_CP_PRUNE,
    [S_CP_RELAYOUT] = LUA_CP LUA_CP_RELAYOUT,
    [S_REWRITE] = LUA_IX LUA_REWRITE_FAST LUA_REWRITE,
    [S_REWRITE_CP] = LUA_IX LUA_CP_PRELUDE LUA_REWRITE_CP LUA_REWRITE,
    [S_REINDEX] = LUA_IX LUA_REINDEX,
    [S_LIST] = LUA_LIST,
    [S_CP_DELETE] = LUA_CP LUA_CP_DELETE,
    [S_PERSIST] = LUA_PERSIST,
    [S_REWRITE_QUICK] = LUA_REWRITE_QUICK,
    [S_COPY] = LUA_IX LUA_CP_ORDER LUA_COPY,
};
