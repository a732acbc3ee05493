/* redis_lua.c — each .lua file of drivers/redis compiled by the server on
 * its own. Part of tests/redis_extra (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

/* Every .lua file of drivers/redis (read from REDIS_LUA_DIR, the source folder)
 * compiles on its own: SCRIPT LOAD of the file alone, as a server compiles a
 * script, answers its SHA1. A file is a script or a part the driver joins
 * with others (scripts.c), so names from another part are globals here, which
 * Lua accepts until the code runs. */
START_TEST(test_lua_files_load_on_their_own)
{
    static const char *const must[] = {"prelude.lua", "cp_prelude.lua", "checkpoint.lua",
                                       "append.lua", "index.lua", "put_log.lua"};
    redisContext *c = plain_connect(base_url);
    /* the check can fail: a file that does not compile is refused */
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", "local = 1");
    ck_assert_msg(r && r->type == REDIS_REPLY_ERROR, "SCRIPT LOAD of bad Lua not refused");
    freeReplyObject(r);
    DIR *d = opendir(REDIS_LUA_DIR);
    ck_assert_msg(d != NULL, "opendir %s: %s", REDIS_LUA_DIR, strerror(errno));
    size_t n = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0)
            continue;
        char path[512], text[16384];
        snprintf(path, sizeof path, "%s/%s", REDIS_LUA_DIR, e->d_name);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "open %s", path);
        size_t got = fread(text, 1, sizeof text, f);
        fclose(f);
        ck_assert_msg(got > 0 && got < sizeof text, "%s: %zu bytes", path, got);
        for (size_t i = 0; i < got; i++) /* lua.h keeps each line a C string literal */
            ck_assert_msg((unsigned char)text[i] >= 0x20 || text[i] == '\n',
                          "%s: control character at byte %zu", e->d_name, i);
        r = redisCommand(c, "SCRIPT LOAD %b", text, got);
        ck_assert_msg(r && r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD %s: %s",
                      e->d_name, r && r->type == REDIS_REPLY_ERROR ? r->str : "no SHA1");
        freeReplyObject(r);
        for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
            seen += strcmp(e->d_name, must[i]) == 0;
        n++;
    }
    closedir(d);
    redisFree(c);
    ck_assert_msg(n >= 16, "only %zu .lua files in %s", n, REDIS_LUA_DIR);
    ck_assert_uint_eq(seen, sizeof must / sizeof must[0]);
}
END_TEST

void redis_add_lua_tests(TCase *tc)
{
    tcase_add_test(tc, test_lua_files_load_on_their_own);
}
