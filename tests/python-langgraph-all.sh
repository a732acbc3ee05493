#!/bin/bash
# python-langgraph-all.sh — beside tests/python-pip.sh (which runs LangGraph's checkpoint
# conformance suite on memory:, SQLite and PostgreSQL in `make check`): the same pip
# install into a fresh venv, then ConvoSaver's tests with the conformance suite on every
# driver and the Redis Cluster (CONVO_TEST_{REDIS,REDIS_CLUSTER,POSTGRES,MONGO}_URL; a
# missing one fails under CONVO_REQUIRE_ALL=1, else skips). Not in `make check`; by hand:
#   D=$(mktemp -d); scripts/test-servers.sh start $D; . $D/env
#   CONVO_REQUIRE_ALL=1 top_builddir=BUILD tests/python-langgraph-all.sh
export CONVO_LANGGRAPH_DRIVERS=all CONVO_PIP_TESTS=langgraph
exec "$(dirname "$0")/python-pip.sh" "$@"
