#!/usr/bin/env python3
"""langgraph_chat.py — a LangGraph chatbot (StateGraph over MessagesState) whose
checkpointer is convo's ConvoSaver, so it picks its conversation up again after a
restart. Usage: langgraph_chat.py [URL] [THREAD] (URL defaults to $CONVO_URL, else
sqlite:langgraph_chat.db; THREAD to "chat"). Reads user lines on stdin and answers
each with a canned reply; needs `pip install 'convo-store[langgraph]' langgraph`.

The one line that differs from LangGraph's own SQLite saver is the `with` line."""

import asyncio
import os
import sys

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from convo.langgraph import ConvoSaver


def chatbot(state):
    """A stand-in for a model: answers the last line, counting the user's turns."""
    turns = sum(1 for m in state["messages"] if m.type == "human")
    line = state["messages"][-1].content
    if line.lower() == "hello":
        return {"messages": [AIMessage("Hello! Tell me anything; I will remember it.")]}
    return {"messages": [AIMessage("You said: %s (turn %d)" % (line, turns))]}


def build(checkpointer):
    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    return builder.compile(checkpointer=checkpointer)


async def main(url, thread):
    config = {"configurable": {"thread_id": thread}}
    async with ConvoSaver.from_conn_string(url) as checkpointer:   # the one line to switch
        graph = build(checkpointer)
        state = await graph.aget_state(config)
        history = state.values.get("messages", [])
        print("restored %d messages" % len(history))
        for m in history:
            print("  %s: %s" % (m.type, m.content))
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            result = await graph.ainvoke({"messages": [HumanMessage(line)]}, config)
            print("assistant: %s" % result["messages"][-1].content, flush=True)


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CONVO_URL",
                                                                "sqlite:langgraph_chat.db")
    asyncio.run(main(url, sys.argv[2] if len(sys.argv) > 2 else "chat"))
