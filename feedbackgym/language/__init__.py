"""Language agents: the LLM agent loop and the chat servers it talks to.

:mod:`~feedbackgym.language.agent_loop` plays text episodes with a chat model,
hints and reviews in its prompt; :mod:`~feedbackgym.language.stand_in_server`
is a stand-in chat server for fault injection (NOT a language model).
"""
