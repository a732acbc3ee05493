"""The LangGraph graphs of test_langgraph_runtime.py, importable and runnable as a
program (a second process of the tests):

    python langgraph_app.py URL THREAD turns N FIRST   runs N chat turns from turn FIRST
    python langgraph_app.py URL THREAD ask TEXT        a turn that stops at interrupt()
    python langgraph_app.py URL THREAD resume ANSWER   resumes it with Command(resume=...)

Each prints the thread's state (snapshot()) as one JSON line. Message ids are
deterministic, so two savers running the same script hold equal states. The state's
messages channel is MessagesState's (add_messages: the whole list in each checkpoint),
or with CONVO_APP_KIND=delta a DeltaChannel (DeltaState: LangGraph rebuilds the list
from the ancestors' writes and a snapshot every SNAPSHOT_EVERY updates)."""

import json
import os
import sys
from typing import Annotated

from typing_extensions import TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

try:    # a langgraph with DeltaChannel (beta)
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph.message import _messages_delta_reducer
except ImportError:     # pragma: no cover - depends on what is installed
    DeltaChannel = None

SNAPSHOT_EVERY = 4      # small: the tests' threads reach several snapshots

if DeltaChannel is not None:
    class DeltaState(TypedDict):
        messages: Annotated[list, DeltaChannel(_messages_delta_reducer,
                                               snapshot_frequency=SNAPSHOT_EVERY)]
else:   # pragma: no cover
    DeltaState = None

KIND = os.environ.get("CONVO_APP_KIND", "full")


def state_of(kind=None):
    return DeltaState if (kind or KIND) == "delta" else MessagesState


def chatbot(state):
    """Answers the last message, naming how many messages it saw."""
    last = state["messages"][-1]
    n = len(state["messages"])
    return {"messages": [AIMessage(content="re: %s (%d)" % (last.content, n),
                                   id="ai-%d-%s" % (n, last.id))]}


def anonymous_chatbot(state):
    """As chatbot, with an AIMessage without an id (add_messages gives it one)."""
    last = state["messages"][-1]
    return {"messages": [AIMessage(content="re: %s (%d)" % (last.content,
                                                            len(state["messages"])))]}


def approve(state):
    """Asks a human (interrupt) before the answer stands."""
    answer = interrupt({"question": "send it?", "draft": state["messages"][-1].content})
    return {"messages": [AIMessage(content="human says %s" % answer,
                                   id="approval-%d" % len(state["messages"]))]}


def make_graph(checkpointer, node, kind=None):
    """START -> node -> END over MessagesState (kind "delta": DeltaState)."""
    b = StateGraph(state_of(kind))
    b.add_node("chatbot", node)
    b.add_edge(START, "chatbot")
    b.add_edge("chatbot", END)
    return b.compile(checkpointer=checkpointer)


def chat_graph(checkpointer, kind=None):
    return make_graph(checkpointer, chatbot, kind)


def anonymous_chat_graph(checkpointer, kind=None):
    b = StateGraph(state_of(kind))
    b.add_node("chatbot", anonymous_chatbot)
    b.add_edge(START, "chatbot")
    b.add_edge("chatbot", END)
    return b.compile(checkpointer=checkpointer)


def approval_graph(checkpointer, kind=None):
    b = StateGraph(state_of(kind))
    b.add_node("chatbot", chatbot)
    b.add_node("approve", approve)
    b.add_edge(START, "chatbot")
    b.add_edge("chatbot", "approve")
    b.add_edge("approve", END)
    return b.compile(checkpointer=checkpointer)


def user(i, text=None):
    return {"messages": [HumanMessage(content=text or "turn %d" % i, id="user-%d" % i)]}


def anonymous_user(i):
    return {"messages": [HumanMessage(content="turn %d" % i)]}


def config(thread_id, checkpoint_id=None):
    c = {"thread_id": thread_id}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def snapshot(state):
    """A StateSnapshot as plain data, without what differs between savers
    (checkpoint ids, timestamps)."""
    return {
        "messages": [[m.type, m.content, m.id] for m in state.values.get("messages", [])],
        "next": list(state.next),
        "interrupts": [i.value for t in state.tasks for i in t.interrupts],
        "step": state.metadata.get("step") if state.metadata else None,
        "source": state.metadata.get("source") if state.metadata else None,
        "has_parent": state.parent_config is not None,
    }


def history(graph, thread_id):
    return [snapshot(s) for s in graph.get_state_history(config(thread_id))]


def main(argv):
    from convo.langgraph import ConvoSaver
    url, thread_id, what = argv[1], argv[2], argv[3]
    with ConvoSaver.from_conn_string(url) as saver:
        if what == "turns":
            graph = chat_graph(saver)
            n, first = int(argv[4]), int(argv[5])
            for i in range(first, first + n):
                graph.invoke(user(i), config(thread_id))
        elif what == "ask":
            graph = approval_graph(saver)
            graph.invoke(user(0, argv[4]), config(thread_id))
        elif what == "resume":
            graph = approval_graph(saver)
            graph.invoke(Command(resume=argv[4]), config(thread_id))
        else:
            raise SystemExit("unknown action %r" % what)
        print(json.dumps({"state": snapshot(graph.get_state(config(thread_id))),
                          "history": history(graph, thread_id)}))


if __name__ == "__main__":
    main(sys.argv)
