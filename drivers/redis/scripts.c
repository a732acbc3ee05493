/* scripts.c — the driver's Lua scripts, each joined from the .lua files of
 * drivers/redis that make it (lua.h, made from them by scripts/embed.sh,
 * defines each file as LUA_<NAME>). Every script but append.lua and persist.lua starts with
 * prelude.lua; the checkpoint scripts go on with cp_prelude.lua, and those
 * that give a checkpoint its order with checkpoint.lua. Loaded by SCRIPT LOAD
 * on every new connection (conn.c). */
#include "redis_int.h"
#include "drivers/redis/lua.h"

#define LUA_CP LUA_PRELUDE LUA_CP_PRELUDE
#define LUA_CP_ORDER LUA_CP_PRELUDE LUA_CHECKPOINT

const char *const convo__rd_scripts[S_COUNT] = {
    [S_APPEND] = LUA_APPEND,
    [S_PERSIST] = LUA_PERSIST,
    [S_EXTRA] = LUA_PRELUDE LUA_EXTRA,
    [S_DELETE] = LUA_PRELUDE LUA_DELETE,
    [S_FORK] = LUA_PRELUDE LUA_FORK,
    [S_IMPORT] = LUA_PRELUDE LUA_IMPORT,
    [S_CP_PUT] = LUA_PRELUDE LUA_CP_ORDER LUA_CP_PUT,
    [S_CP_PUT_LOG] = LUA_PRELUDE LUA_CP_ORDER LUA_PUT_LOG,
    [S_CP_MIGRATE] = LUA_PRELUDE LUA_CP_ORDER LUA_CP_MIGRATE,
    [S_CP_WRITES] = LUA_CP LUA_CP_WRITES,
    [S_CP_GET] = LUA_CP LUA_CP_GET,
    [S_CP_LIST] = LUA_CP LUA_CP_LIST,
    [S_CP_PRUNE] = LUA_CP LUA_CP_PRUNE,
    [S_CP_RELAYOUT] = LUA_CP LUA_CP_RELAYOUT,
    [S_REWRITE] = LUA_PRELUDE LUA_REWRITE_FAST LUA_REWRITE,
    [S_REWRITE_CP] = LUA_CP LUA_REWRITE_CP LUA_REWRITE,
};
