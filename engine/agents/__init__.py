"""The agent roles of an optimization run (Planner, Executor, Fixer, Summarizer). Pure Python, no Django.

    base.py        request/response records shared with `engine.search`; `CallRecord` = one AgentCall row
    llm.py         `LLMClient`: the `openai` AsyncOpenAI client with per-role settings, concurrency limit,
                   retries with backoff, token usage and cost (price table passed in)
    llm_agents.py  `LLMAgents`: the four roles over `LLMClient`, prompt templates and reply parsing
    prompting.py   renders each language's `prompts/*.md` with the problem, kernel, profile (with meanings), hardware
                   rules, memory; what a language says comes from its `LanguagePrompts` part (the registry's)
    parsing.py     robust reply parsing: last fenced Python block, plans (numbered list or JSON), memory summaries
    imports.py     the standard imports an Executor reply may leave out, added back (the language's part says which)
    offline.py     `OfflineAgents`: deterministic search over the rewrite catalog, for runs with no endpoint
    rewrites.py    what a rewrite is; each language's catalog, found through the registry (in its platform folder)

Choosing agents for a run (the Django layer does this from settings):

    agents = OfflineAgents()                                    # no endpoint configured
    agents = LLMAgents(LLMClient({"planner": RoleSettings(model=..., base_url=..., api_key=...), ...},
                                 prices={"model": (usd_per_m_input, usd_per_m_output)}))
"""
