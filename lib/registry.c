/* registry.c — the drivers built into this libconvo, chosen by URL scheme
 * (their tables are declared in convo/driver.h). */
#include "internal.h"
#include <string.h>

static const convo_driver *const drivers[] = {
    &convo_driver_memory,
#ifdef HAVE_DRIVER_SQLITE
    &convo_driver_sqlite,
#endif
#ifdef HAVE_DRIVER_REDIS
    &convo_driver_redis,
#endif
#ifdef HAVE_DRIVER_POSTGRES
    &convo_driver_postgres,
#endif
#ifdef HAVE_DRIVER_MONGO
    &convo_driver_mongo,
#endif
    NULL};

static const char *const names[] = {
    "memory",
#ifdef HAVE_DRIVER_SQLITE
    "sqlite",
#endif
#ifdef HAVE_DRIVER_REDIS
    "redis",
#endif
#ifdef HAVE_DRIVER_POSTGRES
    "postgres",
#endif
#ifdef HAVE_DRIVER_MONGO
    "mongo",
#endif
    NULL};

const char *const *convo_drivers(void)
{
    return names;
}

const convo_driver *convo__driver_find(const char *scheme)
{
    for (size_t i = 0; drivers[i]; i++)
        for (const char *const *s = drivers[i]->schemes; *s; s++)
            if (strcmp(*s, scheme) == 0)
                return drivers[i];
    return NULL;
}
