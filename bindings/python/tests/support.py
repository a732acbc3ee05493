"""Shared by the binding's tests: the drivers to run against, each with a URL
in a namespace of its own (redis prefix=, postgres schema=, mongo database=),
and DriverCase, a TestCase opening a fresh Store per test.

memory: and SQLite (a temporary file) always run; Redis, PostgreSQL and
MongoDB run when CONVO_TEST_REDIS_URL / _POSTGRES_URL / _MONGO_URL is set.
A missing server or driver skips, unless CONVO_REQUIRE_ALL=1: then it fails."""

import os
import shutil
import tempfile
import unittest
import uuid

import convo

DRIVERS = ["memory", "sqlite", "redis", "postgres", "mongo"]

# driver -> (environment variable, URL parameter naming the namespace)
NETWORKED = {
    "redis": ("CONVO_TEST_REDIS_URL", "prefix"),
    "postgres": ("CONVO_TEST_POSTGRES_URL", "schema"),
    "mongo": ("CONVO_TEST_MONGO_URL", "database"),
}

REQUIRE_ALL = os.environ.get("CONVO_REQUIRE_ALL") == "1"


def namespace():
    """A name unique to this run, valid as a Redis prefix, a PostgreSQL
    schema and a MongoDB database name."""
    return "convo_py_%d_%s" % (os.getpid(), uuid.uuid4().hex[:10])


def with_param(url, name, value):
    sep = "&" if "?" in url else "?"
    return "%s%s%s=%s" % (url, sep, name, value)


def unavailable(reason):
    """Skips the test class, or fails it under CONVO_REQUIRE_ALL=1."""
    if REQUIRE_ALL:
        raise AssertionError(reason + " (CONVO_REQUIRE_ALL=1)")
    raise unittest.SkipTest(reason)


class DriverCase(unittest.TestCase):
    """Base of a test class run against one driver (set `driver`). Each test
    gets self.store, open on self.url; thread ids from self.tid() are unique
    to the test. Threads left in a networked namespace are deleted at the end."""

    driver = None
    url = None
    _tmpdir = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        built = convo.drivers()
        if cls.driver == "memory":
            cls.url = "memory:"
        elif cls.driver == "sqlite":
            if "sqlite" not in built:
                unavailable("the sqlite driver is not built into libconvo")
            cls._tmpdir = tempfile.mkdtemp(prefix="convo-py-")
            cls.url = "sqlite:" + os.path.join(cls._tmpdir, "test.db")
        else:
            var, param = NETWORKED[cls.driver]
            base = os.environ.get(var)
            if not base:
                unavailable("%s is not set" % var)
            if cls.driver not in built:
                unavailable("%s is set but the %s driver is not built" % (var, cls.driver))
            cls.url = with_param(base, param, namespace())

    @classmethod
    def tearDownClass(cls):
        if cls.driver in NETWORKED and cls.url:
            cls._empty_namespace()
        if cls._tmpdir:
            shutil.rmtree(cls._tmpdir, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def _empty_namespace(cls):
        try:
            with convo.Store(cls.url) as s:
                for t in s.thread_ids():
                    s.delete(t)
        except convo.ConvoError:
            pass  # the server may be gone; the namespace is unique anyway

    @property
    def shared_store(self):
        """True when two opens of self.url see the same data (not memory:)."""
        return self.driver != "memory"

    def setUp(self):
        super().setUp()
        self.store = convo.Store(self.url)
        self.addCleanup(self.store.close)

    def tid(self, name="t"):
        return "%s/%s" % (self._testMethodName, name)

    def open_store(self, **options):
        """Another handle on the same URL, closed after the test."""
        s = convo.Store(self.url, **options)
        self.addCleanup(s.close)
        return s


def per_driver(module_globals, mixin):
    """Defines <Mixin>_<driver> test classes in the calling module."""
    for name in DRIVERS:
        cls_name = "%s_%s" % (mixin.__name__, name)
        module_globals[cls_name] = type(cls_name, (mixin, DriverCase),
                                        {"driver": name, "__module__": module_globals["__name__"]})
